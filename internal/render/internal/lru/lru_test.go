package lru

import "testing"

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2, 0)
	c.Add("a", 1, 0)
	c.Add("b", 2, 0)
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.Add("c", 3, 0)
	if _, ok := c.Get("b"); ok {
		t.Error("b should have been evicted as least recently used")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s missing", k)
		}
	}
}

func TestCacheBoundsCost(t *testing.T) {
	c := New[string, int](10, 10)
	c.Add("a", 1, 6)
	c.Add("b", 2, 6)
	if _, ok := c.Get("a"); ok {
		t.Error("a should have been evicted: total cost 12 > 10")
	}
	c.Add("huge", 3, 11)
	if _, ok := c.Get("huge"); ok {
		t.Error("an entry costlier than the bound must not be stored")
	}
	if _, ok := c.Get("b"); !ok {
		t.Error("b must survive the refused add")
	}
	c.Add("b", 4, 1)
	if v, _ := c.Get("b"); v != 4 || c.Len() != 1 {
		t.Errorf("replace: got value %d len %d, want 4 and 1", v, c.Len())
	}
	c.Remove("b")
	if c.Len() != 0 {
		t.Errorf("len after remove = %d", c.Len())
	}
}
