package config

import (
	"fmt"
	"time"
)

// Smart is the SMART collector section.
type Smart struct {
	Enabled bool `yaml:"enabled"`
	// Smartctl is the smartctl binary (looked up in PATH when not absolute).
	Smartctl string `yaml:"smartctl"`
	// Interval between SMART reads of one device; SMART never runs inside a scrape.
	Interval time.Duration `yaml:"interval"`
	// Timeout per smartctl invocation; the whole process group is killed.
	Timeout time.Duration `yaml:"timeout"`
}

func (s *Smart) setDefaults() {
	s.Enabled = true
	s.Smartctl = "smartctl"
	s.Interval = 5 * time.Minute
	s.Timeout = 30 * time.Second
}

func (s *Smart) validate() error {
	if s.Interval <= 0 {
		return fmt.Errorf("smart.interval: must be positive")
	}
	if s.Timeout <= 0 {
		return fmt.Errorf("smart.timeout: must be positive")
	}
	return nil
}
