package doclinks

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

// heading is one ATX heading of a Markdown document.
type heading struct {
	line  int // 1-based
	level int
	text  string // as written, without the #s
}

var atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$`)

// headings lists the ATX headings of a Markdown document, outside fenced
// code blocks (``` or ~~~). Setext headings are not used in this
// repository's documents and are not recognised.
func headings(md string) []heading {
	var out []heading
	fence := ""
	for i, l := range strings.Split(md, "\n") {
		t := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			n := len(t) - len(strings.TrimLeft(t, t[:1]))
			fence = strings.Repeat(t[:1], n)
			continue
		}
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text := m[2]
		// A closing sequence of #s, preceded by a space, is not content.
		if s := strings.TrimRight(text, "#"); s != text && (s == "" || strings.HasSuffix(s, " ") || strings.HasSuffix(s, "\t")) {
			text = strings.TrimRight(s, " \t")
		}
		out = append(out, heading{line: i + 1, level: len(m[1]), text: text})
	}
	return out
}

var inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is the anchor GitHub gives a heading's text: links reduced to their
// text, lower case, every character that is not a letter, a mark, a number,
// a space, '-' or '_' dropped (backticks and punctuation included), each
// space turned into '-'.
func slug(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists a document's heading anchors; a repeated slug gets -1, -2,
// … in order, as on GitHub.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(md) {
		a := slug(h.text)
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}

// An anchor reference: a document name (design.md, docs/runbook.md,
// README.md) or nothing (a link within the document), then #anchor.
var (
	docRef  = regexp.MustCompile(`(?:^|[^\w.-])((?:[\w.-]+/)*[\w-]+\.md)#([\p{L}\p{N}\p{M}_-]+)`)
	selfRef = regexp.MustCompile(`\]\(#([\p{L}\p{N}\p{M}_-]+)\)`)
)

// problem is one finding, printed as path:line: what.
type problem struct {
	path string
	line int
	what string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.path, p.line, p.what) }

// checkAnchors returns every anchor reference in files that does not
// resolve. docs maps a document's base name (design.md, README.md) to its
// anchors; a reference names a document by its base name, whatever the
// directory it is written with, since the documents' base names are
// unique. A reference to a document not in docs is not checked (it is not
// one of ours). A link #anchor inside a Markdown file resolves against that
// file.
func checkAnchors(files map[string]string, docs map[string]map[string]bool) []problem {
	var out []problem
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for i, l := range strings.Split(files[name], "\n") {
			for _, m := range docRef.FindAllStringSubmatch(l, -1) {
				doc := path.Base(m[1])
				if as, ok := docs[doc]; ok && !as[m[2]] {
					out = append(out, problem{name, i + 1, fmt.Sprintf("%s#%s: %s has no such heading", m[1], m[2], doc)})
				}
			}
			if as, ok := docs[path.Base(name)]; ok && strings.HasSuffix(name, ".md") {
				for _, m := range selfRef.FindAllStringSubmatch(l, -1) {
					if !as[m[1]] {
						out = append(out, problem{name, i + 1, fmt.Sprintf("#%s: %s has no such heading", m[1], path.Base(name))})
					}
				}
			}
		}
	}
	return out
}

// historyWords are the words that make a heading a piece of history rather
// than a name for what the system does: issue and wave numbers, the passes
// and stops of a piece of work, a cluster version given as a marker, the
// seeds' open questions, the spec the design replaced, "as built".
var historyWords = regexp.MustCompile(`(?i)` + strings.Join([]string{
	`\bissues?\s*#?\d`,
	`\(\s*issues?\b`,
	`\bwaves?\b`,
	`\bpass(es)?\b`,
	`\b(this|that|next|last|previous|first|second|third|fourth|fifth)\s+stop\b`,
	`\bstop\s*\d`,
	`\(\s*cluster version \d`,
	`\bat cluster version \d`,
	`\bOQ-\d`,
	`\bSPEC\b`,
	`\bas built\b`,
	`\bcontinued\b`,
}, "|"))

// historyInHeadings returns the headings of a document that name history.
func historyInHeadings(name, md string) []problem {
	var out []problem
	for _, h := range headings(md) {
		if w := historyWords.FindString(h.text); w != "" {
			out = append(out, problem{name, h.line, fmt.Sprintf("heading %q names history (%q): name what the section describes", h.text, w)})
		}
	}
	return out
}

// specCitation is a citation of SPEC.md (the word SPEC and a section
// number, "the SPEC's rules").
// \b keeps identifiers such as ROUTE_STATE_UNSPECIFIED out.
var specCitation = regexp.MustCompile(`\bSPEC\b`)

// specCitations returns every line of files that cites SPEC.md.
func specCitations(files map[string]string) []problem {
	var out []problem
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for i, l := range strings.Split(files[name], "\n") {
			if specCitation.MatchString(l) {
				out = append(out, problem{name, i + 1, "cites SPEC.md, which is not in the repository: cite the design.md section by its anchor (" + strings.TrimSpace(l) + ")"})
			}
		}
	}
	return out
}

// tracked reads every tracked text file: Go, proto, Markdown, YAML, the CI
// script, test data — whatever holds no NUL byte and is valid UTF-8. This
// package's own files are left out: they hold broken references on
// purpose.
func tracked(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("git", "-C", root, "ls-files", "-z")
	outb, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v): the document checks need the tracked files", err)
	}
	files := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(outb), "\x00"), "\x00") {
		if name == "" || strings.HasPrefix(name, "internal/doclinks/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			continue // not text
		}
		files[name] = string(b)
	}
	return files
}

// documents returns the anchors of every Markdown document in docs/ and of
// the README, by base name.
func documents(t *testing.T, files map[string]string) map[string]map[string]bool {
	t.Helper()
	docs := map[string]map[string]bool{}
	for name, text := range files {
		if name == "README.md" || (path.Dir(name) == "docs" && strings.HasSuffix(name, ".md")) {
			if _, dup := docs[path.Base(name)]; dup {
				t.Fatalf("two documents named %s: anchor references by base name would be ambiguous", path.Base(name))
			}
			docs[path.Base(name)] = anchors(text)
		}
	}
	if len(docs["design.md"]) == 0 {
		t.Fatal("docs/design.md is missing or has no headings")
	}
	return docs
}

func report(t *testing.T, ps []problem) {
	t.Helper()
	for _, p := range ps {
		t.Error(p)
	}
}

// Every design.md#anchor (and every anchor into the other documents) in
// the tree names a heading.
func TestAnchorsResolve(t *testing.T) {
	files := tracked(t)
	report(t, checkAnchors(files, documents(t, files)))
}

// No heading of the documents names a piece of history.
func TestNoHistoryInHeadings(t *testing.T) {
	files := tracked(t)
	var ps []problem
	for name, text := range files {
		if name == "README.md" || (path.Dir(name) == "docs" && strings.HasSuffix(name, ".md")) {
			ps = append(ps, historyInHeadings(name, text)...)
		}
	}
	slices.SortFunc(ps, func(a, b problem) int { return strings.Compare(a.String(), b.String()) })
	report(t, ps)
}

// The documents cite design.md, never SPEC.md.
func TestDocsCiteNoSpec(t *testing.T) {
	files := tracked(t)
	docs := map[string]string{}
	for name, text := range files {
		if strings.HasSuffix(name, ".md") {
			docs[name] = text
		}
	}
	report(t, specCitations(docs))
}

// Code, .proto files and scripts cite design.md, never SPEC.md. Comments
// that still cite a SPEC section fail here, each with its file and line, until
// they cite the design.md section that holds the rule.
func TestCodeCitesNoSpec(t *testing.T) {
	files := tracked(t)
	code := map[string]string{}
	for name, text := range files {
		if !strings.HasSuffix(name, ".md") {
			code[name] = text
		}
	}
	report(t, specCitations(code))
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Cluster versions and features", "cluster-versions-and-features"},
		{"Operating: health, failover, recovery", "operating-health-failover-recovery"},
		{"Ops, the scheduler and the switch", "ops-the-scheduler-and-the-switch"},
		{"A reporter's evidence bound", "a-reporters-evidence-bound"},
		{"The `effects` map", "the-effects-map"},
		{"`hotsplitctl`", "hotsplitctl"},
		{"What-if", "what-if"},
		{"Split keys at versions 1 and 2", "split-keys-at-versions-1-and-2"},
		{"snake_case stays", "snake_case-stays"},
		{"HLC − wall (skew)", "hlc--wall-skew"},
		{"Über café", "über-café"},
		{"See [the catalog](#the-catalog)", "see-the-catalog"},
		{"Operator boundaries kept, 2026-12-06", "operator-boundaries-kept-2026-12-06"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestHeadingsAndAnchors(t *testing.T) {
	md := strings.Join([]string{
		"# Title",
		"## Notes",
		"text # not a heading",
		"```",
		"# a comment in a code block",
		"```",
		"~~~sh",
		"## nor this",
		"~~~",
		"### Notes",
		"## Closed ##",
		"#nospace",
		"    # indented code",
		"## Notes",
	}, "\n")
	var got []string
	for _, h := range headings(md) {
		got = append(got, fmt.Sprintf("%d:%d:%s", h.line, h.level, h.text))
	}
	want := []string{"1:1:Title", "2:2:Notes", "10:3:Notes", "11:2:Closed", "14:2:Notes"}
	if !slices.Equal(got, want) {
		t.Errorf("headings = %q, want %q", got, want)
	}
	as := anchors(md)
	for _, a := range []string{"title", "notes", "notes-1", "closed", "notes-2"} {
		if !as[a] {
			t.Errorf("anchor %q missing from %v", a, as)
		}
	}
	if len(as) != 5 {
		t.Errorf("anchors = %v, want 5", as)
	}
}

// The negative control: a small tree in memory with good and broken
// references; exactly the broken ones are reported, with file and line.
func TestCheckAnchorsFindsBrokenOnes(t *testing.T) {
	design := "# hotsplit design\n\n## The catalog\n\nSee [the fence](#hlc-and-the-fence) and [the catalog](#the-catalog).\n\n## HLC and the fence\n"
	runbook := "# Runbook\n\n## Leader loss\n"
	files := map[string]string{
		"docs/design.md":    design,
		"docs/runbook.md":   runbook,
		"README.md":         "# hotsplit\n\nbash .ci/run  # docs/design.md#testing-and-ci\n[catalog](docs/design.md#the-catalog)\n",
		"fsm/fence.go":      "package fsm\n\n// fence is the rule of docs/design.md#hlc-and-the-fence.\n// See docs/design.md#the-fence-in-apply, and design.md#the-catalog.\n",
		"deploy/alerts.yml": "runbook: docs/runbook.md#leader-loss\nrunbook: docs/runbook.md#quorum-loss\n",
		"docs/ops.md":       "[stale](design.md#the-catalog) [bad](design.md#the-catalog-as-built) [web](https://example.com/x.md#frag)\n[self](#nowhere)\n",
	}
	docs := map[string]map[string]bool{}
	for name, text := range files {
		if strings.HasPrefix(name, "docs/") || name == "README.md" {
			docs[path.Base(name)] = anchors(text)
		}
	}
	var got []string
	for _, p := range checkAnchors(files, docs) {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:3: docs/design.md#testing-and-ci: design.md has no such heading",
		"deploy/alerts.yml:2: docs/runbook.md#quorum-loss: runbook.md has no such heading",
		"docs/ops.md:1: design.md#the-catalog-as-built: design.md has no such heading",
		"docs/ops.md:2: #nowhere: ops.md has no such heading",
		"fsm/fence.go:4: docs/design.md#the-fence-in-apply: design.md has no such heading",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The history check fails on the headings it exists for and passes the
// ones that name behaviour.
func TestHistoryWords(t *testing.T) {
	for _, tc := range []struct {
		heading string
		history bool
	}{
		{"## hlc (issue 2)", true},
		{"### Ingest, second pass: the leader's cost per row (issue 19, continued)", true},
		{"## Split decisions at cluster version 2 (issue 13)", true},
		{"## Merges by hand (cluster version 3, `manual_merge`)", true},
		{"### Integrity faults (issue 12), 2026-12-03", true},
		{"## fsm (issues 3, 5, 6)", true},
		{"### The hold band (OQ-2)", true},
		{"## The second wave", true},
		{"### After this stop", true},
		{"## Where the build departs from or refines the SPEC", true},
		{"## The catalog as built", true},
		{"### Merge pass", true},
		{"## Cluster versions and features", false},
		{"## Stuck or paused operation", false},
		{"### Operator boundaries kept, 2026-12-06", false},
		{"### Passwords and bypasses", false},
		{"## Shard groups and moves", false},
		{"### Split keys at versions 1 and 2", false},
		{"## Issues we do not protect against", false},
		{"### Step changes", false},
	} {
		ps := historyInHeadings("docs/x.md", tc.heading+"\n")
		if got := len(ps) > 0; got != tc.history {
			t.Errorf("%q: history %v, want %v (%v)", tc.heading, got, tc.history, ps)
		}
	}
	// Outside headings the words are text, and headings in code blocks are
	// not headings.
	if ps := historyInHeadings("docs/x.md", "Issue 13 made this.\n```\n## issue 2\n```\n"); len(ps) != 0 {
		t.Errorf("text or code flagged: %v", ps)
	}
}

func TestSpecCitations(t *testing.T) {
	files := map[string]string{
		"a.go": "// DefaultConfig returns the SPEC \u00a76 defaults.\nRouteState_ROUTE_STATE_UNSPECIFIED\nconst env = \"HOTSPLIT_TEST_RAFT_FLOOD_SPEC\"\n// the SPEC's rules\n",
		"b.md": "See design.md#the-catalog.\n",
	}
	var got []string
	for _, p := range specCitations(files) {
		got = append(got, fmt.Sprintf("%s:%d", p.path, p.line))
	}
	if want := []string{"a.go:1", "a.go:4"}; !slices.Equal(got, want) {
		t.Errorf("citations at %v, want %v", got, want)
	}
}
