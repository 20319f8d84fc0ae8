package inventory

import (
	"errors"
	"strings"
	"testing"
)

func TestNameGrammar(t *testing.T) {
	for _, ok := range []string{"a", "node-0", "dev.eu_1", "0x", strings.Repeat("a", MaxNameLen)} {
		if err := CheckName("name", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "-rf", "a/b", ".hidden", "a b", "a\x00b", "é", strings.Repeat("a", MaxNameLen+1)} {
		err := CheckName("nodes[1].name", bad)
		if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "nodes[1].name") {
			t.Errorf("%q: want ErrBadName naming the field, got %v", bad, err)
		}
	}
}

// Stack names follow the same grammar within Pulumi's 100 bytes.
func TestStackNameGrammar(t *testing.T) {
	if err := CheckStackName("--stack", strings.Repeat("s", MaxStackNameLen)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"../x", "-rf", "a/b", "", strings.Repeat("s", MaxStackNameLen+1)} {
		err := CheckStackName("--stack", bad)
		if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "--stack") {
			t.Errorf("%q: want ErrBadName naming --stack, got %v", bad, err)
		}
	}
	if err := CheckStackName("--stack", "a/b"); !strings.Contains(err.Error(), "want a letter or digit") {
		t.Errorf("the error must say what is valid: %v", err)
	}
}
