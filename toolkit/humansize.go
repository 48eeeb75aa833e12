package toolkit

import "fmt"

// HumanSize formats a byte count for people: 512 B, 3.4 KiB, 2.0 MiB. Tools
// use it in results and messages, so that every size reads alike.
func HumanSize[N ~int | ~int64](n N) string {
	const unit = 1024
	b := int64(n)
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for m := b / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTP"[exp])
}
