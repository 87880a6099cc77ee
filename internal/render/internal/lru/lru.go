// Package lru is a small, concurrency-safe least-recently-used cache bounded
// by entry count and by the summed cost of its entries. The renderer keeps
// parsed templates, loaded charts and fetched template text in it.
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values and evicts the least recently used entries when
// it holds more than maxEntries entries or more than maxCost in total cost.
// The zero value is not usable; call New.
type Cache[K comparable, V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxCost    int64
	cost       int64
	order      *list.List // front = most recently used
	items      map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key   K
	value V
	cost  int64
}

// New returns a cache holding at most maxEntries entries whose costs sum to
// at most maxCost. A maxCost of zero or less disables the cost bound.
func New[K comparable, V any](maxEntries int, maxCost int64) *Cache[K, V] {
	if maxEntries < 1 {
		maxEntries = 1
	}
	return &Cache[K, V]{
		maxEntries: maxEntries,
		maxCost:    maxCost,
		order:      list.New(),
		items:      make(map[K]*list.Element),
	}
}

// Get returns the value stored under key and marks it recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).value, true
}

// Add stores value under key with the given cost, replacing an existing
// value, and evicts old entries until the bounds hold again. A value whose
// cost alone exceeds the cost bound is not stored.
func (c *Cache[K, V]) Add(key K, value V, cost int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeElement(el)
	}
	if c.maxCost > 0 && cost > c.maxCost {
		return
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value, cost: cost})
	c.cost += cost
	for c.order.Len() > c.maxEntries || (c.maxCost > 0 && c.cost > c.maxCost) {
		c.removeElement(c.order.Back())
	}
}

// Remove deletes the entry stored under key, if any.
func (c *Cache[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeElement(el)
	}
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *Cache[K, V]) removeElement(el *list.Element) {
	e := el.Value.(*entry[K, V])
	c.order.Remove(el)
	delete(c.items, e.key)
	c.cost -= e.cost
}
