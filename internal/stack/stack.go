// Package stack reads template.yaml — the SAM template users deploy — into
// plain values with its intrinsic functions resolved, so the tests, the
// local runner and LocalStack provisioning all derive from the template
// instead of keeping a second copy of it.
//
// Parameters resolve to their defaults (or overrides) and conditions are
// evaluated. What only a deployment knows stays symbolic: !Ref of a
// resource becomes "${Name}" and !GetAtt becomes "${Name.Attr}", the same
// placeholders !Sub uses, so a caller can substitute real values.
package stack

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Pseudo-parameter values used when resolving.
const (
	StackName = "outflow"
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// Template is a resolved template.
type Template struct {
	Parameters map[string]Parameter
	Conditions map[string]bool
	Resources  map[string]Resource
	Outputs    map[string]any
}

// Parameter is one template parameter.
type Parameter struct {
	Type           string
	Default        any
	AllowedValues  []any
	AllowedPattern string
	// ConstraintDescription is what CloudFormation says, in place of
	// the pattern, when a value breaks it.
	ConstraintDescription string
	MinValue              *float64
	MaxValue              *float64
	Description           string
	// Value is what it resolved to: the default or the override.
	Value any
	// text is the value as CloudFormation passes it to Ref: the string
	// given, whatever the type ("00" stays "00" for a Number).
	text string
}

// Allows reports whether CloudFormation accepts value for the parameter:
// a Number must parse and lie within MinValue and MaxValue, a value must
// be one of AllowedValues if there are any, a String must match
// AllowedPattern as a whole (CloudFormation matches the whole value), and
// each element of a CommaDelimitedList must.
func (p Parameter) Allows(value string) error {
	if p.Type == "Number" {
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", value)
		}
		if p.MinValue != nil && n < *p.MinValue {
			return fmt.Errorf("%q is below MinValue %v", value, *p.MinValue)
		}
		if p.MaxValue != nil && n > *p.MaxValue {
			return fmt.Errorf("%q is above MaxValue %v", value, *p.MaxValue)
		}
	}
	if len(p.AllowedValues) > 0 && !slices.ContainsFunc(p.AllowedValues, func(a any) bool { return fmt.Sprint(a) == value }) {
		return fmt.Errorf("%q is not one of AllowedValues %v", value, p.AllowedValues)
	}
	if p.AllowedPattern != "" && (p.Type == "String" || p.Type == commaList) {
		re, err := regexp.Compile(`^(?:` + p.AllowedPattern + `)$`)
		if err != nil {
			return fmt.Errorf("AllowedPattern %q: %w", p.AllowedPattern, err)
		}
		elems := []string{value}
		if p.Type == commaList {
			elems = strings.Split(value, ",")
		}
		for _, e := range elems {
			if !re.MatchString(e) && p.ConstraintDescription != "" {
				return fmt.Errorf("%q: %s", e, p.ConstraintDescription)
			}
			if !re.MatchString(e) {
				return fmt.Errorf("%q does not match AllowedPattern %q", e, p.AllowedPattern)
			}
		}
	}
	return nil
}

// commaList is the CommaDelimitedList parameter type: Ref gives the value
// split at each comma, so an empty value is [""], not [].
const commaList = "CommaDelimitedList"

// Resource is one resource, its properties resolved. For serverless
// functions the template's Globals are merged in.
type Resource struct {
	Type       string
	Properties map[string]any
	Metadata   map[string]any
	// Condition names the condition the resource depends on, if any.
	// Resources whose condition is false are left out of the template.
	Condition string
}

// noValue marks AWS::NoValue, which removes the key that holds it.
type noValue struct{}

// Load reads and resolves the template at path; overrides replace
// parameter defaults. A default or override the parameter's constraints
// refuse is an error, as it is for CloudFormation.
func Load(path string, overrides map[string]string) (*Template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	return parse(raw, path, overrides)
}

// parse resolves a template given as YAML (or JSON, which is YAML).
func parse(raw []byte, path string, overrides map[string]string) (*Template, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(root.Content) != 1 {
		return nil, fmt.Errorf("parse %s: empty document", path)
	}
	doc, err := decodeNode(root.Content[0])
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	top, _ := doc.(map[string]any)
	r := &resolver{t: &Template{Parameters: map[string]Parameter{}, Conditions: map[string]bool{}, Resources: map[string]Resource{}}}

	for name, v := range asMap(top["Parameters"]) {
		var p Parameter
		if err := remarshal(v, &p); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", name, err)
		}
		p.Value, p.text = p.Default, fmt.Sprint(p.Default)
		if o, ok := overrides[name]; ok {
			p.Value, p.text = o, o
			if p.Type == "Number" {
				n, err := strconv.ParseFloat(o, 64)
				if err != nil {
					return nil, fmt.Errorf("parameter %s: %q is not a number", name, o)
				}
				p.Value = n
			}
		}
		// CloudFormation refuses a value, default or given, that breaks the
		// parameter's constraints: so does Load.
		if err := p.Allows(p.text); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", name, err)
		}
		if p.Type == commaList {
			var l []any
			for _, e := range strings.Split(p.text, ",") {
				l = append(l, e)
			}
			p.Value = l
		}
		r.t.Parameters[name] = p
	}
	for name := range overrides {
		if _, ok := r.t.Parameters[name]; !ok {
			return nil, fmt.Errorf("override for unknown parameter %q", name)
		}
	}
	r.conditions = asMap(top["Conditions"])
	for name := range r.conditions {
		if _, err := r.condition(name); err != nil {
			return nil, err
		}
	}
	if err := r.rules(asMap(top["Rules"])); err != nil {
		return nil, err
	}
	globals := asMap(asMap(top["Globals"])["Function"])
	for name, v := range asMap(top["Resources"]) {
		res := asMap(v)
		typ, _ := res["Type"].(string)
		cond, _ := res["Condition"].(string)
		if cond != "" {
			on, err := r.condition(cond)
			if err != nil {
				return nil, fmt.Errorf("resource %s: %w", name, err)
			}
			if !on {
				continue
			}
		}
		props := asMap(res["Properties"])
		if typ == "AWS::Serverless::Function" {
			props = mergeGlobals(globals, props)
		}
		resolved, err := r.resolve(props)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
		meta, err := r.resolve(asMap(res["Metadata"]))
		if err != nil {
			return nil, fmt.Errorf("resource %s metadata: %w", name, err)
		}
		r.t.Resources[name] = Resource{Type: typ, Properties: asMap(resolved), Metadata: asMap(meta), Condition: cond}
	}
	// An output under a false condition is left out, as CloudFormation
	// leaves it out of the stack's outputs.
	outputs := map[string]any{}
	for name, v := range asMap(top["Outputs"]) {
		if cond, _ := asMap(v)["Condition"].(string); cond != "" {
			on, err := r.condition(cond)
			if err != nil {
				return nil, fmt.Errorf("output %s: %w", name, err)
			}
			if !on {
				continue
			}
		}
		outputs[name] = v
	}
	outs, err := r.resolve(outputs)
	if err != nil {
		return nil, fmt.Errorf("outputs: %w", err)
	}
	r.t.Outputs = asMap(outs)
	return r.t, nil
}

// mergeGlobals applies SAM's Globals rules for the keys Outflow uses: maps
// (Environment.Variables) merge, the function's own values win.
func mergeGlobals(globals, props map[string]any) map[string]any {
	out := maps.Clone(globals)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range props {
		if gm, ok := out[k].(map[string]any); ok {
			if pm, ok := v.(map[string]any); ok {
				out[k] = mergeGlobals(gm, pm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// Decode converts the resource's properties into v (a struct with JSON
// tags or field names matching the CloudFormation property names).
func (r Resource) Decode(v any) error { return remarshal(r.Properties, v) }

// OfType returns the names of every resource of the given type, sorted.
func (t *Template) OfType(typ string) []string {
	var names []string
	for name, r := range t.Resources {
		if r.Type == typ {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// decodeNode turns YAML into plain values, keeping CloudFormation's short
// tags (!Ref X) as their long form ({"Ref": X}).
func decodeNode(n *yaml.Node) (any, error) {
	var v any
	custom := strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!")
	switch n.Kind {
	case yaml.AliasNode:
		return decodeNode(n.Alias)
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := decodeNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := decodeNode(c)
			if err != nil {
				return nil, err
			}
			l = append(l, val)
		}
		v = l
	case yaml.ScalarNode:
		if custom {
			v = n.Value
		} else if err := n.Decode(&v); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	if custom {
		name := strings.TrimPrefix(n.Tag, "!")
		if name != "Ref" && name != "Condition" {
			name = "Fn::" + name
		}
		if name == "Fn::GetAtt" {
			if s, ok := v.(string); ok {
				a, b, _ := strings.Cut(s, ".")
				v = []any{a, b}
			}
		}
		return map[string]any{name: v}, nil
	}
	return v, nil
}
