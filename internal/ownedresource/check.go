package ownedresource

import (
	"errors"
	"fmt"
	"reflect"
	"text/template/parse"
)

// dataFields are the names templates may use: the fields of Data.
var dataFields = func() map[string]bool {
	fields := map[string]bool{}
	for f := range reflect.TypeFor[Data]().Fields() {
		fields[f.Name] = true
	}
	return fields
}()

// CheckTemplate reports what makes a string value fail to render for every
// version: it does not parse, uses a construct Render refuses (range,
// define, block, template calls, a function other than the bounded few),
// is longer or has more nodes than one object's templates may have, or
// names a field Data lacks, on any branch. The admission webhook refuses such values, so that a
// TemporalWorkerOwnedResource that can never be applied is not admitted.
// Errors that depend on the version's values (index out of range, say)
// are left to Render, which reports them in the object's status.
func CheckTemplate(text string) error {
	tmpl, err := parseBounded(text, &budget{})
	if err != nil || tmpl.Tree == nil {
		return err
	}
	return checkFields(tmpl.Tree.Root, true)
}

// checkFields walks n for field references on the top-level data. Inside
// a with, dot is the with's value, so only $-rooted references are
// checked there (dotIsData false).
func checkFields(n parse.Node, dotIsData bool) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkFields(c, dotIsData); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkFields(n.Pipe, dotIsData)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := checkFields(c, dotIsData); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := checkFields(a, dotIsData); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return checkFields(n.Node, dotIsData)
	case *parse.FieldNode:
		if dotIsData {
			return checkIdent(n.Ident)
		}
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			return checkIdent(n.Ident[1:])
		}
	case *parse.IfNode:
		return errors.Join(checkFields(n.Pipe, dotIsData), checkFields(n.List, dotIsData), checkFields(n.ElseList, dotIsData))
	case *parse.WithNode:
		// Dot inside is the pipeline's value; in the else branch it is
		// unchanged.
		return errors.Join(checkFields(n.Pipe, dotIsData), checkFields(n.List, false), checkFields(n.ElseList, dotIsData))
	}
	return nil
}

// checkIdent checks a field chain on Data: a known field, and nothing
// after it (the fields are strings).
func checkIdent(ident []string) error {
	if len(ident) == 0 {
		return nil
	}
	if !dataFields[ident[0]] {
		return fmt.Errorf("template: unknown field .%s (known: .BuildID, .DeploymentName, .TemporalDeploymentName, .TemporalNamespace)", ident[0])
	}
	if len(ident) > 1 {
		return fmt.Errorf("template: .%s is a string and has no field .%s", ident[0], ident[1])
	}
	return nil
}
