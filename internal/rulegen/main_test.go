package rulegen

import (
	"testing"

	"github.com/diskcanary/diskcanary/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
