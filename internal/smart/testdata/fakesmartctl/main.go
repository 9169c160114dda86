// Command fakesmartctl stands in for smartctl in diskcanary's tests. It
// replays saved `smartctl --json` files and misbehaves on request: sleep,
// hang forever (with a grandchild in its process group), exit with any
// status, print garbage. Its behaviour comes from the JSON file named by
// $FAKESMARTCTL_CONFIG (see smarttest.FakeConfig); every start and end is
// appended to the config's log so tests can check runs never overlap.
// A self-test start (--test=KIND or -t KIND) prints the device's selftest
// fixture (or a bare successful answer) and makes the next testing_reads
// reads print its testing fixture, as a drive reports a running test.
// A read that does not ask for the self-test log (--log=selftest, -l
// selftest, -a, -x) gets none, and no exit bit 7: smartctl sets that bit
// ("the device self-test log contains records of errors") only while it
// reads the log, so the fixture's own log and bit are the answer to a
// caller that asked for them.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type device struct {
	Fixture string `json:"fixture"`
	Sleep   string `json:"sleep"`
	Hang    bool   `json:"hang"`
	Escape  bool   `json:"escape"`
	Exit    *int   `json:"exit"`
	Garbage bool   `json:"garbage"`
	Stderr  string `json:"stderr"`

	SelfTest     string `json:"selftest"`
	Testing      string `json:"testing"`
	TestingReads int    `json:"testing_reads"`
}

type config struct {
	Scan        []map[string]string `json:"scan"`
	ScanFixture string              `json:"scan_fixture"`
	Devices     map[string]device   `json:"devices"`
	Log         string              `json:"log"`
	PIDFile     string              `json:"pidfile"`
}

func main() {
	if os.Getenv("FAKESMARTCTL_CHILD") != "" {
		hang() // the grandchild of a hang: only a process-group kill ends it
	}
	data, err := os.ReadFile(os.Getenv("FAKESMARTCTL_CONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakesmartctl:", err)
		os.Exit(1)
	}
	var c config
	if err := json.Unmarshal(data, &c); err != nil {
		fmt.Fprintln(os.Stderr, "fakesmartctl:", err)
		os.Exit(1)
	}
	args := os.Args[1:]
	for _, a := range args {
		if (a == "--scan-open" || a == "--scan") && c.ScanFixture != "" {
			data, err := os.ReadFile(c.ScanFixture)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fakesmartctl:", err)
				os.Exit(1)
			}
			os.Stdout.Write(data)
			return
		}
		if a == "--scan-open" || a == "--scan" {
			out, _ := json.Marshal(map[string]any{
				"json_format_version": []int{1, 0},
				"smartctl":            map[string]any{"version": []int{7, 3}, "argv": os.Args, "exit_status": 0},
				"devices":             c.Scan,
			})
			os.Stdout.Write(out)
			return
		}
	}
	name := args[len(args)-1]
	d, ok := c.Devices[name]
	if !ok {
		fmt.Printf(`{"json_format_version":[1,0],"smartctl":{"version":[7,3],"messages":[{"string":"%s: No such device","severity":"error"}],"exit_status":2}}`, name)
		os.Exit(2)
	}
	logf(c.Log, "start %s %d %s", name, time.Now().UnixNano(), strings.Join(args, " "))
	// The state of a "running" self-test lives beside the log, which a
	// test keeps while it rewrites the config.
	testing := c.Log + ".testing." + strings.ReplaceAll(name, "/", "_")
	if isTestStart(args) {
		if c.Log != "" && d.TestingReads > 0 {
			_ = os.WriteFile(testing, []byte(strconv.Itoa(d.TestingReads)), 0o644)
		}
		d.Fixture = d.SelfTest
		if d.Fixture == "" {
			fmt.Printf(`{"json_format_version":[1,0],"smartctl":{"version":[7,3],"argv":["smartctl"],"exit_status":0}}`)
			logf(c.Log, "end %s %d", name, time.Now().UnixNano())
			return
		}
	} else if data, err := os.ReadFile(testing); c.Log != "" && err == nil {
		if n, _ := strconv.Atoi(string(data)); n > 0 {
			d.Fixture = d.Testing
			if n == 1 {
				_ = os.Remove(testing)
			} else {
				_ = os.WriteFile(testing, []byte(strconv.Itoa(n-1)), 0o644)
			}
		}
	}
	if d.Sleep != "" {
		dur, _ := time.ParseDuration(d.Sleep)
		time.Sleep(dur)
	}
	if d.Hang {
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "FAKESMARTCTL_CHILD=1")
		child.Stdout = os.Stdout // holds the pipe, like a stuck helper would
		if d.Escape {
			// A helper in its own session survives the process-group kill
			// and keeps the output pipe open.
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := child.Start(); err == nil && c.PIDFile != "" {
			logf(c.PIDFile, "%d %d", os.Getpid(), child.Process.Pid)
		}
		hang()
	}
	if d.Stderr != "" {
		fmt.Fprintln(os.Stderr, d.Stderr)
	}
	code := 0
	switch {
	case d.Garbage:
		fmt.Println("Segmentation fault <html> not json {{{")
	case d.Fixture != "":
		data, err := os.ReadFile(d.Fixture)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakesmartctl:", err)
			os.Exit(1)
		}
		var f struct {
			Smartctl struct {
				ExitStatus int `json:"exit_status"`
			} `json:"smartctl"`
		}
		_ = json.Unmarshal(data, &f)
		code = f.Smartctl.ExitStatus
		if !isTestStart(args) && !asksSelfTestLog(args) {
			data, code = withoutSelfTestLog(data, code)
		}
		os.Stdout.Write(data)
	}
	if d.Exit != nil {
		code = *d.Exit
	}
	logf(c.Log, "end %s %d", name, time.Now().UnixNano())
	os.Exit(code)
}

func isTestStart(args []string) bool {
	for i, a := range args {
		if strings.HasPrefix(a, "--test=") || a == "-t" && i+1 < len(args) {
			return true
		}
	}
	return false
}

// asksSelfTestLog reports whether smartctl would read the self-test log
// with these arguments: -l/--log selftest, or -a/-x (also inside a
// cluster of short flags such as -aj).
func asksSelfTestLog(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--log=selftest" || a == "-lselftest" || a == "--all" || a == "--xall":
			return true
		case (a == "-l" || a == "--log") && i+1 < len(args) && args[i+1] == "selftest":
			return true
		case len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], "abcdefghijklmnopqrstuvwxyz") == "" && strings.ContainsAny(a[1:], "ax"):
			return true
		}
	}
	return false
}

// withoutSelfTestLog drops the self-test logs from a saved output and
// exit bit 7 from its status, as smartctl prints it when not asked for
// the log.
func withoutSelfTestLog(data []byte, code int) ([]byte, int) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil {
		return data, code
	}
	for k := range doc {
		if k == "ata_smart_self_test_log" || k == "nvme_self_test_log" || strings.HasPrefix(k, "scsi_self_test_") {
			delete(doc, k)
		}
	}
	code &^= 1 << 7
	var sc map[string]json.RawMessage
	if json.Unmarshal(doc["smartctl"], &sc) == nil {
		sc["exit_status"], _ = json.Marshal(code)
		doc["smartctl"], _ = json.Marshal(sc)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return data, code
	}
	return out, code
}

func logf(path, format string, args ...any) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

// hang blocks forever. (A bare select{} would be caught by the runtime's
// deadlock detector and exit.)
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}
