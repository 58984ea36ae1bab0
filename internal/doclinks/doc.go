// Package doclinks holds tests, and only tests, that keep the repository's
// references to its own documents honest.
//
// docs/design.md is the reference that code, .proto files, scripts and the
// other documents cite by heading anchor ("docs/design.md#the-catalog").
// The tests here compute each document's anchors the way GitHub does and
// fail, naming file and line, on:
//
//   - an anchor into a document of docs/ or the README (design.md#…,
//     benchmarks.md#…, runbook.md#…, or #… inside a document) that names no
//     heading of that document;
//   - a citation of SPEC.md, which is not in the repository: a reader cannot
//     open it, so the rule it names must be cited by its design.md anchor;
//   - a heading in docs/ or the README that names a piece of history (an
//     issue, a wave, a pass, a stop, a cluster version as a marker, SPEC):
//     headings are anchors, and anchors must outlive the work that wrote
//     them. Which cluster version turns a behaviour on belongs in the text.
//
// What it must not do: render Markdown, follow links outside the
// repository, or grow code that anything else imports. It has no non-test
// code beyond this comment, imports nothing of ours, and reads the tree
// through `git ls-files` and the standard library only.
package doclinks
