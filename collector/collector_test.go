package collector

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/diskcanary/diskcanary/internal/config"
)

// A flag the user gave beats the file's enabled key, which beats the part's
// default; parts without a file section (blocklatency, errors, pressure)
// follow their default unless a flag says otherwise.
func TestEnabled(t *testing.T) {
	def, err := config.Parse(config.Default)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{
		"probes": true, "diskstats": true, "smart": true, "blocklatency": true, "errors": true, "pressure": true, "contention": true,
	}, Enabled(def, nil))

	c, err := config.Parse([]byte("probes:\n  enabled: false\ndiskstats:\n  enabled: false\nsmart:\n  enabled: false\n"))
	require.NoError(t, err)
	require.Equal(t, map[string]bool{
		"probes": false, "diskstats": true, "smart": false, "blocklatency": false, "errors": true, "pressure": true, "contention": true,
	}, Enabled(c, map[string]bool{"diskstats": true, "blocklatency": false}))
}
