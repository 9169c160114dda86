package main

import (
	"math"
	"strconv"
	"strings"
)

// formatValue renders v in one of Grafana's units, with three significant
// digits.
func formatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	if math.IsInf(v, 0) {
		if v > 0 {
			return "+Inf"
		}
		return "-Inf"
	}
	switch {
	case unit == "s":
		return seconds(v)
	case unit == "ms":
		return seconds(v / 1000)
	case unit == "percentunit":
		return sig(v*100) + "%"
	case unit == "percent":
		return sig(v) + "%"
	case unit == "bytes":
		return scaled(v, 1024, []string{" B", " KiB", " MiB", " GiB", " TiB", " PiB"})
	case unit == "decbytes":
		return scaled(v, 1000, []string{" B", " kB", " MB", " GB", " TB", " PB"})
	case unit == "Bps":
		return scaled(v, 1000, []string{" B/s", " kB/s", " MB/s", " GB/s", " TB/s"})
	case unit == "iops":
		return scaled(v, 1000, []string{" io/s", "K io/s", "M io/s"})
	case unit == "celsius":
		return sig(v) + " °C"
	case strings.HasPrefix(unit, "suffix:"):
		return sig(v) + strings.TrimPrefix(unit, "suffix:")
	}
	return scaled(v, 1000, []string{"", "K", "Mil", "Bil", "Tri"})
}

// seconds is a duration from ns to hours.
func seconds(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0 s"
	case a < 1e-6:
		return sig(v*1e9) + " ns"
	case a < 1e-3:
		return sig(v*1e6) + " µs"
	case a < 1:
		return sig(v*1e3) + " ms"
	case a < 60:
		return sig(v) + " s"
	case a < 3600:
		return sig(v/60) + " min"
	}
	return sig(v/3600) + " hour"
}

func scaled(v, base float64, units []string) string {
	i := 0
	for math.Abs(v) >= base && i < len(units)-1 {
		v /= base
		i++
	}
	return sig(v) + units[i]
}

// sig is v with three significant digits, no exponent, no trailing zeros.
func sig(v float64) string {
	if v == 0 {
		return "0"
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if digits < 0 {
		digits = 0
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
