// Package docs holds the project's documentation; its test checks that every
// relative link in README.md and docs/*.md resolves: the file or directory
// exists in the tree, and a #anchor names a heading of the target file as
// GitHub renders it. A link that breaks when a page moves or a heading is
// renamed fails here instead of in a reader's browser.
package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// TestLinksResolve checks the README and every page in docs/ against the
// repository tree (the test runs in docs/, so the tree is "..").
func TestLinksResolve(t *testing.T) {
	tree := os.DirFS("..")
	pages, err := fs.Glob(tree, "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md"}, pages...)
	problems, links := checkLinks(tree, pages)
	for _, p := range problems {
		t.Error(p)
	}
	// A parser that found no links would pass every tree: the README
	// links to the docs pages, so there are always some.
	if links < 20 {
		t.Errorf("found %d relative links in %d pages; the link parser is broken", links, len(pages))
	}
}

// TestBrokenLinksAreReported runs the checker on a small tree with one link
// of each kind, good and broken.
func TestBrokenLinksAreReported(t *testing.T) {
	tree := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n\n" +
			"[ok](docs/a.md) [ok anchor](docs/a.md#how-it-measures) [self](#top)\n" +
			"[dir](deploy) [external](https://example.com/x.md#nope) <https://example.com>\n" +
			"[missing file](docs/nope.md) [missing anchor](docs/a.md#no-such-heading)\n" +
			"`[in code](docs/nope.md)`\n\n```\n[in a fence](docs/nope.md)\n```\n")},
		"docs/a.md": {Data: []byte("## How it measures\n\n[up](../README.md#top) [out](../../x.md)\n" +
			"[ref]: b.md\n")},
		"deploy/x.yml": {Data: []byte("x: 1\n")},
	}
	problems, links := checkLinks(tree, []string{"README.md", "docs/a.md"})
	want := []string{
		`README.md:5: docs/nope.md: no such file or directory in the tree`,
		`README.md:5: docs/a.md#no-such-heading: no heading "no-such-heading" in docs/a.md`,
		`docs/a.md:3: ../../x.md: outside the repository`,
		`docs/a.md:4: b.md: no such file or directory in the tree`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if links != 9 {
		t.Errorf("relative links checked: %d, want 9", links)
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"How it measures":                     "how-it-measures",
		"Rule 1: percentiles, not averages":   "rule-1-percentiles-not-averages",
		"Rule 4: the write pattern is etcd's": "rule-4-the-write-pattern-is-etcds",
		"Block request latency (eBPF)":        "block-request-latency-ebpf",
		"`check` and `smart`":                 "check-and-smart",
		"The node's eBPF program":             "the-nodes-ebpf-program",
		"probes — the engine":                 "probes--the-engine",
		"snake_case Name":                     "snake_case-name",
		"[a link](x.md) and *emphasis*":       "a-link-and-emphasis",
		"Kubernetes (kustomize)":              "kubernetes-kustomize",
		"DiskcanaryFdatasyncSlow":             "diskcanaryfdatasyncslow",
		"diskcanary_smart_… by protocol, 1–7": "diskcanary_smart_-by-protocol-17",
		"  Closing hashes ## ":                "closing-hashes",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestAnchorsNumberRepeatedHeadings(t *testing.T) {
	page := "# A\n## Setup\ntext\n## Setup\n### Setup\n```\n# not a heading\n```\n    # nor this\n<a id=\"custom\"></a>\n"
	got := anchors(page)
	want := []string{"a", "setup", "setup-1", "setup-2", "custom"}
	if !slices.Equal(got, want) {
		t.Errorf("anchors = %q, want %q", got, want)
	}
}

var (
	// inlineLink is [text](target) or ![alt](target "title"); the target
	// has no spaces or parentheses (none of ours does).
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// refLink is a reference definition, [label]: target.
	refLink = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s+(\S+)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// htmlAnchor is an explicit anchor, <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*)$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkLinks reads each page of tree and returns one line per relative link
// that does not resolve ("page:line: target: why"), and how many relative
// links it checked. Links with a scheme (https:, mailto:) are not checked:
// the tests run without a network.
func checkLinks(tree fs.FS, pages []string) (problems []string, links int) {
	anchorCache := map[string][]string{}
	for _, page := range pages {
		data, err := fs.ReadFile(tree, page)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", page, err))
			continue
		}
		for _, l := range prose(string(data)) {
			for _, target := range targets(l.text) {
				if scheme.MatchString(target) {
					continue
				}
				links++
				if why := resolve(tree, page, target, anchorCache); why != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", page, l.n, target, why))
				}
			}
		}
	}
	return problems, links
}

// targets returns the link targets on one line of prose.
func targets(line string) []string {
	line = codeSpan.ReplaceAllString(line, "")
	var out []string
	for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	if m := refLink.FindStringSubmatch(line); m != nil {
		out = append(out, m[1])
	}
	return out
}

// resolve says why target, linked from page, does not resolve ("" if it
// does).
func resolve(tree fs.FS, page, target string, cache map[string][]string) string {
	file, anchor, _ := strings.Cut(target, "#")
	if file == "" {
		file = page
	} else {
		file = path.Join(path.Dir(page), file)
	}
	if file == ".." || strings.HasPrefix(file, "../") {
		return "outside the repository"
	}
	if _, err := fs.Stat(tree, file); err != nil {
		return "no such file or directory in the tree"
	}
	if anchor == "" {
		return ""
	}
	if path.Ext(file) != ".md" {
		return fmt.Sprintf("an anchor into %s, which is not a Markdown page", file)
	}
	as, ok := cache[file]
	if !ok {
		data, err := fs.ReadFile(tree, file)
		if err != nil {
			return err.Error()
		}
		as = anchors(string(data))
		cache[file] = as
	}
	if !slices.Contains(as, anchor) {
		return fmt.Sprintf("no heading %q in %s", anchor, file)
	}
	return ""
}

// anchors returns the anchors GitHub gives a page: each ATX heading's slug,
// a repeated slug numbered -1, -2 in order, and explicit <a id/name> anchors.
func anchors(page string) []string {
	var out []string
	seen := map[string]int{}
	for _, l := range prose(page) {
		if m := heading.FindStringSubmatch(l.text); m != nil {
			s := slug(m[2])
			if n := seen[s]; n > 0 {
				out = append(out, fmt.Sprintf("%s-%d", s, n))
			} else {
				out = append(out, s)
			}
			seen[s]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

var (
	mdLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	closing  = regexp.MustCompile(`\s+#+\s*$`)
	emphasis = strings.NewReplacer("*", "", "`", "")
)

// slug is GitHub's heading anchor: the heading's rendered text (links as
// their text, no code or emphasis marks, no closing #s), lower-cased, every
// character but letters, digits, spaces, '-' and '_' dropped, and each space
// a '-'.
func slug(text string) string {
	text = strings.TrimSpace(text)
	text = closing.ReplaceAllString(text, "")
	text = mdLink.ReplaceAllString(text, "$1")
	text = emphasis.Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// A line of prose and its number.
type line struct {
	n    int
	text string
}

// prose returns the lines of a Markdown page outside code: fenced blocks
// (``` or ~~~) and indented blocks (4 spaces or a tab after a blank line)
// hold no links or headings.
func prose(page string) []line {
	var out []line
	var fence string
	indented, prevBlank := false, true
	sc := bufio.NewScanner(strings.NewReader(page))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimLeft(text, " ")
		blank := strings.TrimSpace(text) == ""
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		case (strings.HasPrefix(text, "    ") || strings.HasPrefix(text, "\t")) && (prevBlank || indented):
			indented = true
		default:
			if !blank {
				indented = false
			}
			out = append(out, line{n, text})
		}
		prevBlank = blank
	}
	return out
}
