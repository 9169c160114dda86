package testkit

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr's ports lie below the default ephemeral range (32768-60999 on
// Linux), so no outgoing connection can take one before the process binds
// it, and the address can be listened on.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err != nil || strings.Join(strings.Fields(string(b)), " ") != "32768 60999" {
		t.Skipf("the ephemeral port range is not Linux's default 32768-60999 (%q, %v)", b, err)
	}
	for range 50 {
		addr := FreeAddr(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		if host != "127.0.0.1" || n < 10000 || n >= 32768 {
			t.Fatalf("FreeAddr = %s, want 127.0.0.1 with a port in 10000-32767", addr)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr = %s, which cannot be listened on: %v", addr, err)
		}
		l.Close()
	}
}
