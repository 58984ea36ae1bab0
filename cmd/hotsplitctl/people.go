package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/hotsplit/hotsplit/hlc"
)

// forPeople renders a message the server wrote (an error, a health reason, a
// warning, a decision's detail) for the text output: enum value names
// become the words the tables use (ROUTE_STATE_ACTIVE → active), and times
// written as raw epoch milliseconds or HLCs (ms.logical, or the 64-bit
// value) become UTC times. Quoted parts (keys, reasons, actors) are left
// exactly as written. JSON output never passes through it: it keeps the
// raw values.
func forPeople(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			b.WriteString(rewriteForPeople(s))
			break
		}
		b.WriteString(rewriteForPeople(s[:i]))
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) { // unterminated: leave the rest alone
			b.WriteString(s[i:])
			break
		}
		b.WriteString(s[i : j+1])
		s = s[j+1:]
	}
	return b.String()
}

var (
	enumWordRE = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`)
	// A 13-digit number, optionally with an HLC's logical part, or a
	// 17-to-19-digit one (a raw 64-bit HLC).
	timeRE = regexp.MustCompile(`\b\d{13}(?:\.\d+)?\b|\b\d{17,19}\b`)
)

// Epoch milliseconds taken for times: 2001-09-09 to 2286-11-20 (13 digits).
const (
	minWallMs = 1_000_000_000_000
	maxWallMs = 9_999_999_999_999
)

func rewriteForPeople(s string) string {
	s = enumWordRE.ReplaceAllStringFunc(s, func(w string) string {
		if word, ok := enumWords()[w]; ok {
			return word
		}
		return w
	})
	return timeRE.ReplaceAllStringFunc(s, func(n string) string {
		ms, logical := n, ""
		if i := strings.IndexByte(n, '.'); i >= 0 {
			ms, logical = n[:i], n[i+1:]
		}
		v, err := strconv.ParseUint(ms, 10, 64)
		if err != nil {
			return n
		}
		if len(ms) > 13 { // a raw HLC (epoch milliseconds have 13 digits)
			v, logical = hlc.Physical(v), strconv.FormatUint(hlc.Logical(v), 10)
		}
		if v < minWallMs || v > maxWallMs {
			return n
		}
		t := formatWall(v)
		if logical != "" && logical != "0" {
			t += " (logical " + logical + ")"
		}
		return t
	})
}

// enumWords maps every enum value name of the API to its word in tables.
var enumWords = sync.OnceValue(func() map[string]string {
	words := map[string]string{}
	protoregistry.GlobalFiles.RangeFilesByPackage("hotsplit.v1", func(f protoreflect.FileDescriptor) bool {
		enums := f.Enums()
		for i := range enums.Len() {
			e := enums.Get(i)
			prefix := upperSnake(string(e.Name())) + "_"
			vals := e.Values()
			for j := range vals.Len() {
				name := string(vals.Get(j).Name())
				words[name] = strings.ToLower(strings.TrimPrefix(name, prefix))
			}
		}
		return true
	})
	return words
})
