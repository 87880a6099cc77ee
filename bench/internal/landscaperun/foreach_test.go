package landscaperun

import (
	"errors"
	"sync"
	"testing"
)

// TestForEach checks that every item is done, with the given number of
// workers, and that an error stops no other item and is returned.
func TestForEach(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e"}
	var mu sync.Mutex
	done := map[string]bool{}
	boom := errors.New("boom")
	err := forEach(items, 2, func(item string) error {
		mu.Lock()
		done[item] = true
		mu.Unlock()
		if item == "c" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("forEach() = %v; want the item's error", err)
	}
	if len(done) != len(items) {
		t.Errorf("done %v; want every one of %v", done, items)
	}
}
