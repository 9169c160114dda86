package deploy

import (
	"testing"

	"github.com/diskcanary/diskcanary/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
