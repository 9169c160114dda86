package rulegen

import (
	"os"
	"testing"

	"github.com/diskcanary/diskcanary/internal/testfs"
)

func TestMain(m *testing.M) {
	testfs.ServeIfChild()
	os.Exit(m.Run())
}
