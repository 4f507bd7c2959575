package ownedresource

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// The bounds on what rendering one object may cost, whatever its templates
// say. Without range, define and template calls a template runs each of its
// nodes at most once, so counting nodes bounds the execution steps. Of the
// functions a template may call, the comparisons, and, or, not, len, index
// and slice make no new strings; print, printf and println check what they
// would make against what is left before they make it. Every value is then
// a field of Data, a literal of the template, or something print, printf or
// println made, so no template, however written, holds more than a few MiB.
const (
	// maxTemplate is the longest string value that may hold a template;
	// parsing is the only cost that grows with it.
	maxTemplate = 64 << 10
	// maxNodes bounds the parse nodes (text, actions, commands, arguments)
	// of all the templates of one object.
	maxNodes = 10_000
	// maxMade bounds the bytes print, printf and println may make for one
	// object, values kept in variables included.
	maxMade = 1 << 20
	// maxFormatNumber bounds a width, precision or argument index in a
	// printf format: fmt pads to up to a million bytes per verb.
	maxFormatNumber = 100
)

// ErrBound is wrapped by the errors of a template that breaks one of the
// bounds; the admission webhook refuses an object whose templates break
// one for a sample version (SampleTarget).
var ErrBound = errors.New("template breaks a bound")

// funcNames are the functions templates may call: text/template's
// built-ins that make no new strings, and print, printf and println,
// replaced by bounded ones. html, js and urlquery (which multiply their
// input's length) and call are not available.
var funcNames = []string{"and", "eq", "ge", "gt", "index", "le", "len", "lt", "ne", "not", "or", "print", "printf", "println", "slice"}

// budget is what one object's templates have left.
type budget struct {
	nodes, made int
}

// funcs are the bounded print, printf and println, charging b.
func (b *budget) funcs() template.FuncMap {
	return template.FuncMap{
		"print": func(args ...any) (string, error) {
			n, err := printBound(args)
			if err != nil {
				return "", err
			}
			return b.charge(n, func() string { return fmt.Sprint(args...) })
		},
		"println": func(args ...any) (string, error) {
			n, err := printBound(args)
			if err != nil {
				return "", err
			}
			return b.charge(n+len(args)+1, func() string { return fmt.Sprintln(args...) })
		},
		"printf": func(format string, args ...any) (string, error) {
			n, err := printfBound(format, args)
			if err != nil {
				return "", err
			}
			return b.charge(n, func() string { return fmt.Sprintf(format, args...) })
		},
	}
}

// charge calls f, whose result is at most bound bytes, if that fits in what
// is left, and charges what it made.
func (b *budget) charge(bound int, f func() string) (string, error) {
	if b.made+bound > maxMade {
		return "", fmt.Errorf("%w: print, printf and println may make at most %d bytes for one object (this call could make %d of the %d left): make fewer or shorter values",
			ErrBound, maxMade, bound, maxMade-b.made)
	}
	s := f()
	b.made += len(s)
	return s, nil
}

// count charges one parse node.
func (b *budget) count() error {
	b.nodes++
	if b.nodes > maxNodes {
		return fmt.Errorf("%w: the templates of one object may have at most %d parse nodes (text, actions, commands, arguments): use fewer or simpler templates", ErrBound, maxNodes)
	}
	return nil
}

// plainLen bounds the length of a as fmt's %v prints it; only the types a
// template can hold are known.
func plainLen(a any) (int, error) {
	switch v := a.(type) {
	case string:
		return len(v), nil
	case Data:
		// Field names and braces, as %+v prints them.
		return len(v.DeploymentName) + len(v.BuildID) + len(v.TemporalNamespace) + len(v.TemporalDeploymentName) + 128, nil
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr, float32, float64, complex64, complex128:
		return 64, nil
	}
	return 0, fmt.Errorf("cannot print a value of type %T", a)
}

func printBound(args []any) (int, error) {
	n := 0
	for _, a := range args {
		l, err := plainLen(a)
		if err != nil {
			return 0, err
		}
		n += l + 1 // and a space
	}
	return n, nil
}

// printfBound bounds the length of fmt.Sprintf(format, args...). It reads
// format as fmt does, for the formats it accepts: flags, a width and a
// precision of at most maxFormatNumber, and a letter or % as the verb.
// Argument indexes ([n]) and * are refused, so the verbs take the
// arguments in turn. Each verb pads to its width and prints its argument:
// as it is, or escaped (%q, %x, %X, the # flag) at most six times longer,
// or a number of at most a few hundred digits, or a %!verb(type=value)
// note; arguments left over are listed after the result.
func printfBound(format string, args []any) (int, error) {
	lens := make([]int, len(args))
	for i, a := range args {
		l, err := plainLen(a)
		if err != nil {
			return 0, err
		}
		lens[i] = l
	}
	number := func(i int) (int, error) {
		j := i
		for j < len(format) && format[j] >= '0' && format[j] <= '9' {
			j++
		}
		if v, err := strconv.Atoi(format[i:j]); j > i && (err != nil || v > maxFormatNumber) {
			return 0, fmt.Errorf("%w: printf widths and precisions may be at most %d, not %s", ErrBound, maxFormatNumber, format[i:j])
		}
		return j, nil
	}
	n, next := len(format), 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		start := i
		i++
		escaped := false
		for ; i < len(format) && strings.IndexByte("#0+- ", format[i]) >= 0; i++ {
			escaped = escaped || format[i] == '#'
		}
		var err error
		if i, err = number(i); err != nil {
			return 0, err
		}
		if i+1 < len(format) && format[i] == '.' {
			if i, err = number(i + 1); err != nil {
				return 0, err
			}
		}
		if i >= len(format) || !(format[i] == '%' || format[i] >= 'a' && format[i] <= 'z' || format[i] >= 'A' && format[i] <= 'Z') {
			return 0, fmt.Errorf("printf: %q is not a verb this printf supports: use flags, a width, a precision and a letter (no * or [n])", format[start:min(i+1, len(format))])
		}
		if format[i] == '%' {
			continue // takes no argument
		}
		arg := 0
		if next < len(lens) {
			arg = lens[next]
		}
		next++
		if escaped || strings.IndexByte("qxX", format[i]) >= 0 {
			arg *= 6
		}
		n += maxFormatNumber + arg + 1024
	}
	for _, l := range lens[min(next, len(lens)):] {
		n += l + 64 // %!(EXTRA type=value, ...)
	}
	return n, nil
}

// parseBounded parses one string value as a template, refusing what
// bounded refuses and charging its nodes to b.
func parseBounded(text string, b *budget) (*template.Template, error) {
	if len(text) > maxTemplate {
		return nil, fmt.Errorf("%w: a string holding a template may be at most %d bytes, not %d: split it", ErrBound, maxTemplate, len(text))
	}
	tmpl, err := template.New("value").Funcs(b.funcs()).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	return tmpl, bounded(tmpl, b)
}

// bounded rejects what would let a template run unbounded in the
// controller: range loops (over an integer literal, say), calls of defined
// templates (which can call each other exponentially often) and functions
// other than funcNames; and it counts the nodes. The strings of Data need
// none of these.
func bounded(tmpl *template.Template, b *budget) error {
	if len(tmpl.Templates()) > 1 {
		return errors.New("template: define and block are not supported")
	}
	if tmpl.Tree == nil {
		return nil
	}
	var check func(n parse.Node) error
	check = func(n parse.Node) error {
		if err := b.count(); err != nil {
			return err
		}
		var children []parse.Node
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				children = n.Nodes
			}
		case *parse.ActionNode:
			children = []parse.Node{n.Pipe}
		case *parse.PipeNode:
			if n != nil {
				for _, d := range n.Decl {
					children = append(children, d)
				}
				for _, c := range n.Cmds {
					children = append(children, c)
				}
			}
		case *parse.CommandNode:
			children = n.Args
		case *parse.ChainNode:
			children = []parse.Node{n.Node}
		case *parse.IfNode:
			children = []parse.Node{n.Pipe, n.List, n.ElseList}
		case *parse.WithNode:
			children = []parse.Node{n.Pipe, n.List, n.ElseList}
		case *parse.IdentifierNode:
			if !slices.Contains(funcNames, n.Ident) {
				return fmt.Errorf("template: function %q is not available; these are: %s", n.Ident, strings.Join(funcNames, ", "))
			}
		case *parse.RangeNode:
			return errors.New("template: range is not supported")
		case *parse.TemplateNode:
			return errors.New("template: template calls are not supported")
		}
		for _, c := range children {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	}
	return check(tmpl.Tree.Root)
}

// SampleTarget is a version of TWD twd with the longest values a real one
// can have (the CRD's bounds on a custom build ID and the Temporal names),
// for the admission webhook to render spec.object against: the bounds are
// on sizes, so what stays within them for this version stays within them
// for others, unless a template branches on the values.
func SampleTarget(namespace, twd, twor string) Target {
	build := strings.Repeat("b", 63)
	return Target{
		Namespace: namespace, WorkerDeployment: twd, OwnedResource: twor, BuildID: build,
		DeploymentName: workload.DeploymentName(twd, build), DeploymentUID: "00000000-0000-0000-0000-000000000000",
		TemporalNamespace: strings.Repeat("n", 255), TemporalDeploymentName: strings.Repeat("d", 255),
	}
}
