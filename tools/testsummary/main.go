// Command testsummary summarises `go test -json` output for CI: the output
// of every failed test, every skipped test with its reason (so CI shows
// that the root-only tests ran), one line per package and a closing count.
// It exits 1 if anything failed.
//
//	go run ./tools/testsummary FILE
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testsummary GO-TEST-JSON-FILE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	defer f.Close()
	if !summarize(f, os.Stdout) {
		os.Exit(1)
	}
}

// event is one line of go test -json (test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

const module = "github.com/diskcanary/diskcanary/"

// summarize writes the summary and says whether everything passed.
func summarize(r io.Reader, w io.Writer) bool {
	out := map[key][]string{}
	result := map[key]string{}
	elapsed := map[key]float64{}
	started := map[key]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // go test's own lines (build errors) are not JSON
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "run":
			started[k] = true
		case "output":
			out[k] = append(out[k], e.Output)
		case "pass", "fail", "skip":
			// A package tested in two runs (CI splits one module's tests)
			// stays failed whatever the other run says.
			if result[k] != "fail" {
				result[k] = e.Action
			}
			elapsed[k] = e.Elapsed
		}
	}
	var tests, failed []key
	var pkgs []string
	for k := range result {
		if k.test == "" {
			pkgs = append(pkgs, k.pkg)
		} else {
			tests = append(tests, k)
		}
	}
	byName := func(a, b key) int { return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test) }
	slices.SortFunc(tests, byName)
	slices.Sort(pkgs)
	for _, k := range tests {
		if result[k] == "fail" {
			failed = append(failed, k)
			fmt.Fprintf(w, "=== FAIL %s %s\n", k.pkg, k.test)
			fmt.Fprint(w, strings.Join(tail(out[k], 60), ""))
		}
	}
	// A package can fail without a failing test (build error, panic,
	// timeout). On a timeout the test that hung never reports a result,
	// and the panic's "running tests:" block names it before thousands of
	// lines of stacks: show both, not the stacks' tail.
	for _, p := range pkgs {
		if result[key{p, ""}] != "fail" || slices.ContainsFunc(failed, func(k key) bool { return k.pkg == p }) {
			continue
		}
		fmt.Fprintf(w, "=== FAIL %s (package)\n", p)
		var unfinished []string
		for k := range started {
			if _, done := result[k]; k.pkg == p && !done {
				unfinished = append(unfinished, k.test)
			}
		}
		slices.Sort(unfinished)
		if len(unfinished) > 0 {
			fmt.Fprintf(w, "still running when the package ended: %s\n", strings.Join(unfinished, ", "))
		}
		// go test attributes the timeout panic to the test that was running.
		lines := out[key{p, ""}]
		for _, t := range unfinished {
			lines = append(lines, out[key{p, t}]...)
		}
		if i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "panic: test timed out") }); i >= 0 {
			fmt.Fprint(w, strings.Join(lines[i:min(len(lines), i+20)], ""))
		} else {
			fmt.Fprint(w, strings.Join(tail(lines, 60), ""))
		}
	}

	fmt.Fprintln(w, "---- skipped tests ----")
	for _, k := range tests {
		if result[k] != "skip" {
			continue
		}
		said := ""
		for _, l := range out[k] {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "---") && !strings.HasPrefix(t, "===") {
				said = t
			}
		}
		fmt.Fprintf(w, "SKIP %s %s: %s\n", strings.TrimPrefix(k.pkg, module), k.test, said)
	}

	fmt.Fprintln(w, "---- test summary ----")
	count := map[string]int{}
	pkgCount := map[string]int{}
	for _, p := range pkgs {
		n := map[string]int{}
		for _, k := range tests {
			if k.pkg == p && !strings.Contains(k.test, "/") {
				n[result[k]]++
			}
		}
		state := result[key{p, ""}]
		pkgCount[state]++
		if state == "skip" {
			state = "none" // go test says skip: no test files
		}
		fmt.Fprintf(w, "%-4s %-60s %7.1fs  pass %3d  skip %2d  fail %2d\n", state, p, elapsed[key{p, ""}], n["pass"], n["skip"], n["fail"])
	}
	for _, k := range tests {
		if !strings.Contains(k.test, "/") {
			count[result[k]]++
		}
	}
	fmt.Fprintf(w, "tests: %d passed, %d skipped, %d failed; packages: %d ok, %d failed\n",
		count["pass"], count["skip"], count["fail"], pkgCount["pass"], pkgCount["fail"])
	return len(failed) == 0 && pkgCount["fail"] == 0
}

func tail(lines []string, n int) []string {
	return lines[max(0, len(lines)-n):]
}
