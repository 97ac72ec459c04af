package replica_test

import (
	"testing"

	"github.com/pgfailover/pgfailover/replica"
)

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want replica.LSN
		ok   bool
	}{
		{"0/0", 0, true},
		{"16/B374D848", 0x16_B374D848, true},
		{"FFFFFFFF/FFFFFFFF", 0xFFFFFFFF_FFFFFFFF, true},
		{"0/3000148", 0x3000148, true},
		{"", 0, false},
		{"16", 0, false},
		{"/1", 0, false},
		{"1/", 0, false},
		{"G/1", 0, false},
		{"1/-1", 0, false},
		{"100000000/0", 0, false},
		{"1/2/3", 0, false},
	} {
		got, err := replica.ParseLSN(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLSN(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("ParseLSN(%q).String() = %q", tc.in, got.String())
		}
	}
}
