package replica

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a position in PostgreSQL's write-ahead log. Zero means unknown.
type LSN uint64

// ParseLSN reads an LSN in PostgreSQL's text form, two hexadecimal
// numbers separated by a slash ("16/B374D848").
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok || hi == "" || lo == "" || len(hi) > 8 || len(lo) > 8 {
		return 0, fmt.Errorf("replica: invalid LSN %q", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("replica: invalid LSN %q", s)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("replica: invalid LSN %q", s)
	}
	return LSN(h<<32 | l), nil
}

// String returns the LSN in PostgreSQL's text form.
func (l LSN) String() string {
	return strings.ToUpper(strconv.FormatUint(uint64(l)>>32, 16) + "/" + strconv.FormatUint(uint64(l)&0xffffffff, 16))
}
