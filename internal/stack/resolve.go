package stack

import (
	"fmt"
	"regexp"
	"strings"
)

// resolver evaluates intrinsic functions against the template's parameters
// and conditions.
type resolver struct {
	t          *Template
	conditions map[string]any
	evaluating map[string]bool
}

func (r *resolver) condition(name string) (bool, error) {
	if v, ok := r.t.Conditions[name]; ok {
		return v, nil
	}
	expr, ok := r.conditions[name]
	if !ok {
		return false, fmt.Errorf("unknown condition %q", name)
	}
	if r.evaluating == nil {
		r.evaluating = map[string]bool{}
	}
	if r.evaluating[name] {
		return false, fmt.Errorf("condition %q refers to itself", name)
	}
	r.evaluating[name] = true
	v, err := r.resolve(expr)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %s is not a boolean", name)
	}
	r.t.Conditions[name] = b
	return b, nil
}

func (r *resolver) resolve(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			rv, err := r.resolve(e)
			if err != nil {
				return nil, err
			}
			if _, drop := rv.(noValue); !drop {
				out = append(out, rv)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
					return r.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			rv, err := r.resolve(e)
			if err != nil {
				return nil, err
			}
			if _, drop := rv.(noValue); !drop {
				out[k] = rv
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

func (r *resolver) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return r.ref(name), nil
	case "Condition":
		name, _ := arg.(string)
		return r.condition(name)
	case "Fn::GetAtt":
		l, ok := arg.([]any)
		if !ok || len(l) != 2 {
			return nil, fmt.Errorf("Fn::GetAtt wants [Resource, Attribute], got %v", arg)
		}
		return fmt.Sprintf("${%v.%v}", l[0], l[1]), nil
	case "Fn::Sub":
		return r.sub(arg)
	case "Fn::If":
		l, ok := arg.([]any)
		if !ok || len(l) != 3 {
			return nil, fmt.Errorf("Fn::If wants [Condition, then, else], got %v", arg)
		}
		name, _ := l[0].(string)
		c, err := r.condition(name)
		if err != nil {
			return nil, err
		}
		if c {
			return r.resolve(l[1])
		}
		return r.resolve(l[2])
	case "Fn::Equals":
		// CloudFormation compares strings, and Ref gives a parameter's
		// value as the string given: "00" is not "0", even for a Number.
		l, err := r.resolve(r.paramText(arg))
		if err != nil {
			return nil, err
		}
		pair, ok := l.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("Fn::Equals wants two values, got %v", arg)
		}
		return fmt.Sprint(pair[0]) == fmt.Sprint(pair[1]), nil
	case "Fn::Not", "Fn::And", "Fn::Or":
		l, err := r.resolve(arg)
		if err != nil {
			return nil, err
		}
		vals, _ := l.([]any)
		result := fn == "Fn::And"
		for _, v := range vals {
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("%s wants booleans, got %v", fn, v)
			}
			switch fn {
			case "Fn::Not":
				return !b, nil
			case "Fn::And":
				result = result && b
			case "Fn::Or":
				result = result || b
			}
		}
		return result, nil
	case "Fn::Contains":
		// A rule function: whether the list holds the string.
		pair, err := r.pair(fn, arg, "[list, string]")
		if err != nil {
			return nil, err
		}
		list, _ := pair[0].([]any)
		for _, v := range list {
			if fmt.Sprint(v) == fmt.Sprint(pair[1]) {
				return true, nil
			}
		}
		return false, nil
	case "Fn::Join":
		pair, err := r.pair(fn, arg, "[delimiter, list]")
		if err != nil {
			return nil, err
		}
		parts, _ := pair[1].([]any)
		strs := make([]string, len(parts))
		for i, p := range parts {
			strs[i] = fmt.Sprint(p)
		}
		return strings.Join(strs, fmt.Sprint(pair[0])), nil
	case "Fn::Split":
		pair, err := r.pair(fn, arg, "[delimiter, string]")
		if err != nil {
			return nil, err
		}
		var out []any
		for _, s := range strings.Split(fmt.Sprint(pair[1]), fmt.Sprint(pair[0])) {
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported intrinsic %s", fn)
}

// pair resolves the two arguments of fn, described by want.
func (r *resolver) pair(fn string, arg any, want string) ([]any, error) {
	l, err := r.resolve(arg)
	if err != nil {
		return nil, err
	}
	pair, ok := l.([]any)
	if !ok || len(pair) != 2 {
		return nil, fmt.Errorf("%s wants %s, got %v", fn, want, arg)
	}
	return pair, nil
}

// rules checks the template's Rules as CloudFormation does before it
// creates anything: each assertion of a rule whose RuleCondition holds
// (or that has none) must hold, else the value is refused with the
// assertion's description.
func (r *resolver) rules(rules map[string]any) error {
	for name, v := range rules {
		rule := asMap(v)
		if cond, ok := rule["RuleCondition"]; ok {
			on, err := r.resolve(cond)
			if err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
			if b, _ := on.(bool); !b {
				continue
			}
		}
		assertions, _ := rule["Assertions"].([]any)
		for _, a := range assertions {
			ok, err := r.resolve(asMap(a)["Assert"])
			if err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
			if b, _ := ok.(bool); !b {
				return fmt.Errorf("rule %s: %v", name, asMap(a)["AssertDescription"])
			}
		}
	}
	return nil
}

// paramText replaces each Ref of a parameter in the list args with the
// parameter's value as given.
func (r *resolver) paramText(args any) any {
	l, ok := args.([]any)
	if !ok {
		return args
	}
	out := make([]any, len(l))
	for i, e := range l {
		out[i] = e
		if m, ok := e.(map[string]any); ok && len(m) == 1 {
			if name, ok := m["Ref"].(string); ok {
				if p, ok := r.t.Parameters[name]; ok {
					out[i] = p.text
				}
			}
		}
	}
	return out
}

// ref resolves a parameter or pseudo parameter; a resource stays symbolic.
func (r *resolver) ref(name string) any {
	switch name {
	case "AWS::StackName":
		return StackName
	case "AWS::Region":
		return Region
	case "AWS::AccountId":
		return AccountID
	case "AWS::Partition":
		return "aws"
	case "AWS::NoValue":
		return noValue{}
	}
	if p, ok := r.t.Parameters[name]; ok {
		return p.Value
	}
	return "${" + name + "}"
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (r *resolver) sub(arg any) (any, error) {
	tmpl, vars := "", map[string]any{}
	switch x := arg.(type) {
	case string:
		tmpl = x
	case []any:
		if len(x) != 2 {
			return nil, fmt.Errorf("Fn::Sub wants a string or [string, map], got %v", arg)
		}
		tmpl, _ = x[0].(string)
		m, err := r.resolve(x[1])
		if err != nil {
			return nil, err
		}
		vars = asMap(m)
	}
	return subVar.ReplaceAllStringFunc(tmpl, func(s string) string {
		name := s[2 : len(s)-1]
		if v, ok := vars[name]; ok {
			return fmt.Sprint(v)
		}
		if strings.Contains(name, ".") {
			return s // a GetAtt: stays symbolic
		}
		if p, ok := r.t.Parameters[name]; ok {
			return p.text // as typed: 31536000, not 3.1536e+07
		}
		return fmt.Sprint(r.ref(name))
	}), nil
}
