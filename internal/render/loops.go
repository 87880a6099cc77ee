package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// MaxConstantIterations bounds how often loops over constants may repeat a
// template's innermost body: range over an integer (range 1000), over until
// or untilStep with constant arguments, nested in each other or reached
// through template calls. A template above it does not parse: no plan needs
// that many repetitions (a render yields at most a few hundred objects), and
// the author learns which loop is wrong before any instance fails.
const MaxConstantIterations = 100_000

// guardNode is what guardLoops inserts: an empty text. Executing a text
// node writes it, even an empty one, and every write to a render's output
// checks the guard (output.Write): so it costs neither a function call nor
// any output, and fails the execution once the guard is stopped. Parse
// trees are read-only at execution, so one node serves every tree.
var guardNode = &parse.TextNode{NodeType: parse.NodeText, Text: []byte{}}

// guardLoops makes every execution of the templates of tmpl stoppable. A
// Go template repeats work only in range loops and template calls: it has no
// other loops and no other recursion. Guarded functions and output writes
// already check the guard, but a loop whose body calls no function and
// writes nothing ({{range 1000000000000}}{{end}}) or a template that calls
// itself twice ({{define "a"}}{{template "a"}}{{template "a"}}{{end}}) do
// neither. guardLoops therefore puts guardNode first into the root of every
// template and into the body of every range, so that an execution that ran
// out of time stops within one iteration or call.
//
// The parse trees are changed in place; call it once, before the template is
// cloned or executed.
func guardLoops(tmpl *template.Template) {
	seen := map[*parse.ListNode]bool{}
	for _, t := range tmpl.Templates() {
		if t.Tree != nil {
			guardList(t.Root, true, seen)
		}
	}
}

// guardList guards the range loops within list and, when first is set,
// puts guardNode first into list itself: a template's root or a loop's
// body. The branches of if, with and a range's else run at most once per
// run of their list and need no guard of their own.
func guardList(list *parse.ListNode, first bool, seen map[*parse.ListNode]bool) {
	if list == nil || seen[list] {
		return
	}
	seen[list] = true
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			guardList(n.List, true, seen)
			guardList(n.ElseList, false, seen)
		case *parse.IfNode:
			guardList(n.List, false, seen)
			guardList(n.ElseList, false, seen)
		case *parse.WithNode:
			guardList(n.List, false, seen)
			guardList(n.ElseList, false, seen)
		}
	}
	if first {
		list.Nodes = slices.Insert(list.Nodes, 0, parse.Node(guardNode))
	}
}

// ErrConstantLoop is matched (errors.Is) by the parse error of a template
// whose loops over constants would repeat their body more than
// MaxConstantIterations times.
var ErrConstantLoop = errors.New("loops over constants repeat their body too often")

// constantLoopError names the loop that repeats too often, where it is and
// how often its body would run.
type constantLoopError struct {
	location string // template:line:column
	loop     string // the range's pipeline
	times    int64
	nested   bool // the count includes loops inside the range
}

func (e *constantLoopError) Error() string {
	what := "repeats its body"
	if e.nested {
		what = "and the loops over constants inside it repeat their innermost body"
	}
	return fmt.Sprintf("template: %s: range %s %s %d times; loops over constants may repeat a body at most %d times",
		e.location, e.loop, what, e.times, MaxConstantIterations)
}

func (e *constantLoopError) Is(target error) bool { return target == ErrConstantLoop }

// checkConstantLoops refuses templates whose loops over constants, nested
// directly or through template calls, repeat their innermost body more than
// MaxConstantIterations times. Loops over variables cannot be judged before
// the execution; the guard stops them at the time limit.
func checkConstantLoops(tmpl *template.Template) error {
	c := loopCounter{tmpl: tmpl, counts: map[string]int64{}, visiting: map[string]bool{}}
	ts := tmpl.Templates()
	slices.SortFunc(ts, func(a, b *template.Template) int { return strings.Compare(a.Name(), b.Name()) })
	for _, t := range ts {
		if _, err := c.template(t.Name()); err != nil {
			return err
		}
	}
	return nil
}

// loopCounter computes how often the loops over constants of each template
// repeat its innermost body: products along nesting, the largest among
// siblings.
type loopCounter struct {
	tmpl     *template.Template
	counts   map[string]int64
	visiting map[string]bool
}

func (c *loopCounter) template(name string) (int64, error) {
	if n, ok := c.counts[name]; ok {
		return n, nil
	}
	if c.visiting[name] {
		// Recursion: how deep it goes depends on the data. The guard in
		// every template's root stops it at the time limit.
		return 1, nil
	}
	t := c.tmpl.Lookup(name)
	if t == nil || t.Tree == nil {
		return 1, nil
	}
	c.visiting[name] = true
	n, err := c.list(t.Tree, t.Root)
	delete(c.visiting, name)
	if err != nil {
		return 0, err
	}
	c.counts[name] = n
	return n, nil
}

func (c *loopCounter) list(tree *parse.Tree, l *parse.ListNode) (int64, error) {
	most := int64(1)
	if l == nil {
		return most, nil
	}
	for _, n := range l.Nodes {
		var k int64 = 1
		var err error
		switch n := n.(type) {
		case *parse.RangeNode:
			k, err = c.rangeCount(tree, n)
		case *parse.IfNode:
			k, err = c.branches(tree, &n.BranchNode)
		case *parse.WithNode:
			k, err = c.branches(tree, &n.BranchNode)
		case *parse.TemplateNode:
			k, err = c.template(n.Name)
		}
		if err != nil {
			return 0, err
		}
		most = max(most, k)
	}
	return most, nil
}

func (c *loopCounter) branches(tree *parse.Tree, b *parse.BranchNode) (int64, error) {
	a, err := c.list(tree, b.List)
	if err != nil {
		return 0, err
	}
	e, err := c.list(tree, b.ElseList)
	if err != nil {
		return 0, err
	}
	return max(a, e), nil
}

func (c *loopCounter) rangeCount(tree *parse.Tree, r *parse.RangeNode) (int64, error) {
	body, err := c.list(tree, r.List)
	if err != nil {
		return 0, err
	}
	alt, err := c.list(tree, r.ElseList)
	if err != nil {
		return 0, err
	}
	k, ok := constantCount(r.Pipe)
	if !ok {
		return max(body, alt), nil
	}
	n := mul(k, body)
	if n > MaxConstantIterations {
		location, _ := tree.ErrorContext(r)
		return 0, &constantLoopError{location: location, loop: r.Pipe.String(), times: n, nested: body > 1}
	}
	return max(n, alt), nil
}

// constantCount returns how many iterations a range pipeline of constants
// makes: an integer, until with an integer, untilStep with three integers,
// alone or in parentheses.
func constantCount(p *parse.PipeNode) (int64, bool) {
	if p == nil || len(p.Cmds) != 1 {
		return 0, false
	}
	args := p.Cmds[0].Args
	ints := func(nodes []parse.Node) ([]int64, bool) {
		out := make([]int64, 0, len(nodes))
		for _, n := range nodes {
			num, ok := n.(*parse.NumberNode)
			if !ok || !num.IsInt {
				return nil, false
			}
			out = append(out, num.Int64)
		}
		return out, true
	}
	if len(args) == 1 {
		switch a := args[0].(type) {
		case *parse.NumberNode:
			if !a.IsInt {
				return 0, false
			}
			return max(a.Int64, 0), true
		case *parse.PipeNode:
			return constantCount(a)
		}
		return 0, false
	}
	fn, ok := args[0].(*parse.IdentifierNode)
	if !ok {
		return 0, false
	}
	v, ok := ints(args[1:])
	if !ok {
		return 0, false
	}
	switch {
	case fn.Ident == "until" && len(v) == 1:
		return abs(v[0]), true
	case fn.Ident == "untilStep" && len(v) == 3:
		return steps(v[0], v[1], v[2]) - 1, true
	}
	return 0, false
}
