package toolkit

import (
	"errors"
	"strings"
)

// validateDuration checks the "duration" format against the ABNF of RFC
// 3339 Appendix A: "P" then weeks alone, or date units and/or "T" and time
// units, each a run of ASCII digits and its letter. Within the date part
// and within the time part the units are consecutive in their order
// (Y M D; H M S): P1Y2D and PT1H2S skip the unit between and are refused.
func validateDuration(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	rest, ok := strings.CutPrefix(s, "P")
	if !ok {
		return errors.New("a duration starts with P")
	}
	if rest == "" {
		return errors.New("nothing after P")
	}
	date, timePart, hasTime := strings.Cut(rest, "T")
	if hasTime && timePart == "" {
		return errors.New("nothing after T")
	}
	dateUnits, err := durationUnits(date)
	if err != nil {
		return err
	}
	if dateUnits == "W" {
		if hasTime {
			return errors.New("weeks cannot be combined with other units")
		}
		return nil
	}
	if !consecutive("YMD", dateUnits) {
		return errors.New("date units must be consecutive, in the order Y M D, each once")
	}
	timeUnits, err := durationUnits(timePart)
	if err != nil {
		return err
	}
	if !consecutive("HMS", timeUnits) {
		return errors.New("time units must be consecutive, in the order H M S, each once")
	}
	return nil
}

// durationUnits returns the unit letters of a run of digit-letter
// components.
func durationUnits(s string) (string, error) {
	var units []byte
	for s != "" {
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || n == len(s) {
			return "", errors.New("each component is digits followed by its unit")
		}
		units = append(units, s[n])
		s = s[n+1:]
	}
	return string(units), nil
}

// consecutive reports whether units is empty or a run of consecutive
// letters of order.
func consecutive(order, units string) bool {
	return units == "" || strings.Contains(order, units)
}
