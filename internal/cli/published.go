package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/delivery"
	"github.com/outflowhq/outflow/internal/dynamo"
)

// The dispatcher's functions publish the configuration they run with in
// the table (dynamo.Publish); the CLI only reads it. Where it is
// published, a command takes the dispatcher's settings from it, and
// refuses settings of its own (flags or OUTFLOW_* variables) that differ;
// where it is not, the command runs on its own settings, as before.

// published reads the table's published configuration; found is false
// when none is published yet.
func (a *app) published(ctx context.Context, client dynamo.ItemGetter) (pub dynamo.Published, found bool, err error) {
	pub, err = dynamo.ReadPublished(ctx, client, a.table)
	if errors.Is(err, dynamo.ErrNotPublished) {
		return pub, false, nil
	}
	return pub, err == nil, err
}

// publishedIfAny reads the published configuration for a command that
// takes it only as a default: none when no table is given.
func (a *app) publishedIfAny(ctx context.Context) (dynamo.Published, bool, error) {
	if a.table == "" {
		return dynamo.Published{}, false, nil
	}
	client, err := a.dynamoClient(ctx)
	if err != nil {
		return dynamo.Published{}, false, err
	}
	return a.published(ctx, client)
}

// settings are the dispatcher settings this shell gives, each "" where it
// gives none: a flag if set, else its OUTFLOW_* variable.
type settings map[string]string

// shellSettings reads them for cmd; routes is --routes, where the
// command has it.
func (a *app) shellSettings(cmd *cobra.Command, routes string) settings {
	s := settings{"OUTFLOW_ROUTES": routes, "OUTFLOW_ORDERED": a.orderedRoutes}
	if cmd.Flags().Changed("shards") {
		s["OUTFLOW_SHARDS"] = strconv.Itoa(a.shards)
	}
	if f := cmd.Flags().Lookup("max-message-bytes"); f != nil && f.Changed {
		s["OUTFLOW_MAX_MESSAGE_BYTES"] = f.Value.String()
	}
	for _, name := range []string{"OUTFLOW_ROUTES", "OUTFLOW_ORDERED", "OUTFLOW_SHARDS", "OUTFLOW_MAX_MESSAGE_BYTES"} {
		if strings.TrimSpace(s[name]) == "" {
			s[name] = strings.TrimSpace(a.getenv(name))
		}
	}
	return s
}

// over returns the value of variable name: the shell's if it gives one,
// else the published one (pub nil: none).
func (s settings) over(pub *dynamo.Published, name string) string {
	if v := s[name]; v != "" || pub == nil {
		return v
	}
	switch name {
	case "OUTFLOW_ROUTES":
		return pub.RoutesString()
	case "OUTFLOW_ORDERED":
		return pub.OrderedString()
	case "OUTFLOW_SHARDS":
		return strconv.Itoa(pub.Shards)
	case "OUTFLOW_MAX_MESSAGE_BYTES":
		return strconv.Itoa(pub.MaxMessageBytes)
	}
	return ""
}

// onPublished is pub with the settings the shell gives in place of its
// own, each read as the functions read it; an unreadable one is a usage
// error naming it.
func (s settings) onPublished(pub dynamo.Published) (dynamo.Published, error) {
	out := pub
	var errs []error
	if v := s["OUTFLOW_ROUTES"]; v != "" {
		routes, err := delivery.ParseRoutes(v)
		errs = append(errs, named("routes", v, err))
		out.Routes = routes
	}
	if v := s["OUTFLOW_ORDERED"]; v != "" {
		ordered, err := config.ParseOrdered(v)
		errs = append(errs, named("ordered routes", v, err))
		out.Ordered = map[string]string{}
		for route, dh := range ordered {
			out.Ordered[route] = string(dh)
		}
	}
	for name, field := range map[string]*int{"OUTFLOW_SHARDS": &out.Shards, "OUTFLOW_MAX_MESSAGE_BYTES": &out.MaxMessageBytes} {
		if v := s[name]; v != "" {
			n, err := strconv.Atoi(v)
			errs = append(errs, named(name, v, err))
			*field = n
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, usageError{err}
	}
	return out, nil
}

func named(what, v string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %q: %w", what, v, err)
}

// differs is the refusal of settings that differ from the published ones.
func (a *app) differs(pub dynamo.Published, diffs []string, advice string) error {
	return usagef("table %s: this shell's settings differ from the configuration the dispatcher published (revision %d%s): %s; %s",
		a.table, pub.Revision, publishedBy(pub), strings.Join(diffs, "; "), advice)
}

func publishedBy(pub dynamo.Published) string {
	if pub.PublishedBy == "" {
		return ""
	}
	return ", by " + pub.PublishedBy
}
