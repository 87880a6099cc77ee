package landscape

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// TreeLimit is how many objects of one kind `landscape status --tree` lists
// beneath one parent; the rest are summarised in one line ("… and 95 more
// SFServiceInstances"), so that the picture stays compact.
const TreeLimit = 10

// Tree is what `landscape status --tree` draws: the landscape's record and
// what its API servers held when they were read (ReadTree). Lines draws it.
type Tree struct {
	// Dir is the state directory.
	Dir string
	// Running reports whether the supervisor is alive; Phase is the
	// landscape's recorded phase.
	Running bool
	Phase   controlplane.Phase
	// Processes counts the recorded processes, Alive those that run.
	Processes, Alive int
	// Clusters are the landscape's clusters: platform, onboarding,
	// workload, then those the local cluster provider created.
	Clusters []TreeNode
}

// TreeNode is one line of the tree with the lines beneath it. Its line is
// "Kind Name  State  Detail", empty parts left out.
type TreeNode struct {
	Kind, Name, State, Detail string
	Children                  []TreeNode
}

// The tree's branches. Box-drawing characters are printed on every output,
// like the "•" and "✓" of the other commands: they are not colours
// (NO_COLOR does not concern them), and the CLI writes UTF-8 everywhere.
const (
	branch     = "├── "
	lastBranch = "└── "
	pipe       = "│   "
	space      = "    "
)

// Lines draws the tree, one string per line, listing at most limit
// children of one kind beneath one parent (all when limit <= 0).
func (t *Tree) Lines(limit int) []string {
	root := "landscape " + t.Dir + " ("
	if t.Running {
		root += string(t.Phase) + ", " + strconv.Itoa(t.Alive) + "/" + strconv.Itoa(t.Processes) + " processes running)"
	} else {
		root += "not running, last phase " + string(t.Phase) + ")"
	}
	lines := []string{root}
	return drawChildren(lines, "", t.Clusters, limit)
}

// drawChildren appends the lines of nodes, beneath a parent whose
// children are indented by prefix.
func drawChildren(lines []string, prefix string, nodes []TreeNode, limit int) []string {
	nodes = summarise(nodes, limit)
	width := 0
	for _, n := range nodes {
		if n.State != "" || n.Detail != "" {
			width = max(width, utf8.RuneCountInString(n.title()))
		}
	}
	for i, n := range nodes {
		b, indent := branch, pipe
		if i == len(nodes)-1 {
			b, indent = lastBranch, space
		}
		lines = append(lines, strings.TrimRight(prefix+b+n.line(width), " "))
		lines = drawChildren(lines, prefix+indent, n.Children, limit)
	}
	return lines
}

// title is the node's kind and name.
func (n TreeNode) title() string {
	return strings.TrimSpace(n.Kind + " " + n.Name)
}

// line is the node's line with its title padded to width, so that the
// states of siblings line up.
func (n TreeNode) line(width int) string {
	title := n.title()
	if n.State == "" && n.Detail == "" {
		return title
	}
	parts := []string{title + strings.Repeat(" ", max(0, width-utf8.RuneCountInString(title)))}
	for _, p := range []string{n.State, n.Detail} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "  ")
}

// summarise keeps the first limit nodes of each kind, in their order, and
// replaces the others of that kind by one line saying how many there are.
// Nodes without a kind are all kept.
func summarise(nodes []TreeNode, limit int) []TreeNode {
	if limit <= 0 {
		return nodes
	}
	count := map[string]int{}
	for _, n := range nodes {
		count[n.Kind]++
	}
	out := make([]TreeNode, 0, len(nodes))
	seen := map[string]int{}
	for _, n := range nodes {
		seen[n.Kind]++
		switch k := seen[n.Kind]; {
		case n.Kind == "" || k <= limit:
			// Nodes without a kind (the clusters) are each of their own.
			out = append(out, n)
		case k == limit+1:
			out = append(out, TreeNode{Name: "… and " + plural(count[n.Kind]-limit, "more "+n.Kind)})
		}
	}
	return out
}
