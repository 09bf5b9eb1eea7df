package shquote

import (
	"os/exec"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, s := range []string{"plain", "with space", "it's", `a"b$c` + "`d`", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh printed %q (%v) for Quote(%q) = %s", out, err, s, Quote(s))
		}
	}
}
