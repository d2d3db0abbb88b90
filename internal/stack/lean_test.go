package stack_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/config"
	"github.com/outflowhq/outflow/internal/stack"
)

// scans splits a role's statements into those that grant dynamodb:Scan
// and the rest.
func scans(stmts []statement) (granted, rest []statement) {
	for _, s := range stmts {
		if slices.Contains(s.Action, "dynamodb:Scan") {
			granted = append(granted, s)
		} else {
			rest = append(rest, s)
		}
	}
	return granted, rest
}

// The sweep's role may Scan two things: the due index (the stray-row
// audit) and, for the lean backstop, the table itself; each statement
// grants Scan alone. The wake's role may Scan nothing: it reads its rows
// from the stream and by key. The grant does not follow LeanStaging: the
// backstop goes on scanning for BackstopDrainHours after lean is turned
// off, and a grant taken away with it would fail those runs. Checked in
// the template and in SAM's translation, which adds roles of its own (the
// schedule's) that must not Scan either.
func TestTemplate_OnlyTheSweepMayScanTheTableAndOnlyForTheBackstop(t *testing.T) {
	t.Parallel()
	for which, get := range map[string]func(map[string]string) *stack.Template{
		"template":    func(o map[string]string) *stack.Template { return load(t, o) },
		"translation": func(o map[string]string) *stack.Template { return translated(t, o) },
	} {
		var byLean []map[string][]statement
		for _, lean := range []string{"false", "true"} {
			byRole := statements(t, get(map[string]string{"LeanStaging": lean}))
			byLean = append(byLean, byRole)
			granted, _ := scans(byRole["SweepRole"])
			var resources []string
			for _, s := range granted {
				require.Equal(t, []string{"dynamodb:Scan"}, s.Action, "%s lean=%s: Scan in a statement of its own", which, lean)
				require.Equal(t, "Allow", s.Effect)
				resources = append(resources, s.Resource...)
			}
			require.ElementsMatch(t, []string{"${OutboxTable.Arn}", "${OutboxTable.Arn}/index/due"}, resources,
				"%s lean=%s: the sweep scans the table (backstop) and the due index (audit), nothing else", which, lean)
			for role, stmts := range byRole {
				if role == "SweepRole" {
					continue
				}
				granted, _ := scans(stmts)
				require.Empty(t, granted, "%s lean=%s: %s may not Scan", which, lean, role)
			}
			require.Contains(t, byRole, "WakeRole", which)
		}
		require.Equal(t, byLean[0], byLean[1], "%s: LeanStaging changes no grant", which)
	}
	// The statement is the backstop's, by its Sid, next to the audit's.
	raw := string(templateText(t))
	require.Contains(t, raw, "- Sid: BackstopScanTable")
	require.Contains(t, raw, "- Sid: AuditDueIndex")
}

// LeanStaging reaches both functions: both publish the configuration the
// producers read, lean included, so a function that ran otherwise would
// publish the other mode at each of its cold starts. The backstop's
// budget reaches the sweep as given.
func TestTemplate_LeanStagingAndTheBackstopReachBothFunctions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lean, pages, drainHours string
		wantPages               int
		wantDrain               time.Duration
	}{
		{"false", "4", "0", 4, 0},
		{"true", "4", "168", 4, 168 * time.Hour},
		{"true", "1", "24", 1, 24 * time.Hour},
		{"true", "100", "8760", 100, 8760 * time.Hour},
		{"false", "37", "36", 37, 36 * time.Hour},
	} {
		overrides := map[string]string{"LeanStaging": tc.lean, "BackstopPages": tc.pages, "BackstopDrainHours": tc.drainHours}
		tpl := load(t, overrides)
		var published []any
		for _, fn := range functions {
			env := function(t, tpl, fn).Environment.Variables
			require.Equal(t, tc.lean, env["OUTFLOW_LEAN"], "%s %v", fn, overrides)
			env["OUTFLOW_TABLE"] = "outbox"
			env["OUTFLOW_ROUTES"] = "orders=http://localhost/1/orders"
			cfg, err := config.Load(func(k string) string { return env[k] })
			require.NoError(t, err, "%s %v", fn, overrides)
			require.Equal(t, tc.lean == "true", cfg.Lean, "%s %v", fn, overrides)
			require.Equal(t, tc.wantPages, cfg.BackstopPages, "%s %v", fn, overrides)
			require.Equal(t, tc.wantDrain, cfg.BackstopDrain, "%s %v", fn, overrides)
			published = append(published, cfg.Published())
		}
		require.Equal(t, published[0], published[1], "%v: both functions publish the same configuration", overrides)
	}
}

// The functions refuse OUTFLOW_LEAN=true with the wake off
// (OUTFLOW_WAKE_GRACE=0s); the template refuses the same pair at deploy,
// and lets through every other, which the functions then load.
func TestTemplate_LeanNeedsTheWake(t *testing.T) {
	t.Parallel()
	_, err := stack.Load(templatePath, withExamples(map[string]string{"LeanStaging": "true", "WakeGraceSeconds": "0"}))
	require.ErrorContains(t, err, "rule LeanNeedsTheWake")
	require.ErrorContains(t, err, "WakeGraceSeconds above 0")
	for _, lean := range []string{"true", "false"} {
		for _, grace := range []string{"0", "1", "15", "900"} {
			if lean == "true" && grace == "0" {
				continue
			}
			overrides := map[string]string{"LeanStaging": lean, "WakeGraceSeconds": grace}
			tpl := load(t, overrides)
			for _, fn := range functions {
				env := function(t, tpl, fn).Environment.Variables
				env["OUTFLOW_TABLE"] = "outbox"
				env["OUTFLOW_ROUTES"] = "orders=http://localhost/1/orders"
				_, err := config.Load(func(k string) string { return env[k] })
				require.NoError(t, err, "%s %v", fn, overrides)
			}
		}
	}
	// Anything but the two words is refused at deploy, as the code
	// would refuse "yes" at init.
	for _, v := range []string{"yes", "True", "1", ""} {
		require.Error(t, load(t, nil).Parameters["LeanStaging"].Allows(v), "LeanStaging %q", v)
	}
}

// BackstopPages is a String with a pattern, as the reservations are: it
// lets through exactly the whole numbers 1 to 100 written plainly, each of
// which the functions load, and refuses what the code would refuse
// ("0", "101") or read as something else ("4.5", "04").
func TestTemplate_BackstopPagesAcceptsExactlyWhatTheCodeAccepts(t *testing.T) {
	t.Parallel()
	p := load(t, nil).Parameters["BackstopPages"]
	require.Equal(t, "String", p.Type)
	require.Equal(t, "4", fmt.Sprint(p.Default), "the code's default")
	var allowed []int
	for n := -1; n <= 1000; n++ {
		v := strconv.Itoa(n)
		if p.Allows(v) != nil {
			continue
		}
		allowed = append(allowed, n)
		kv := map[string]string{"OUTFLOW_TABLE": "outbox", "OUTFLOW_ROUTES": "orders=http://localhost/1/orders", "OUTFLOW_BACKSTOP_PAGES": v}
		cfg, err := config.Load(func(k string) string { return kv[k] })
		require.NoError(t, err, "BackstopPages %s", v)
		require.Equal(t, n, cfg.BackstopPages)
	}
	require.Len(t, allowed, 100)
	require.Equal(t, 1, allowed[0])
	require.Equal(t, 100, allowed[len(allowed)-1])
	for _, v := range []string{"", "04", "4.5", " 4", "4 ", "1e2", "+4", "0x10", "four"} {
		err := p.Allows(v)
		require.Error(t, err, "BackstopPages %q", v)
		require.True(t, v == "" || strings.Contains(err.Error(), "must be a whole number from 1 to 100"), "%q: %v", v, err)
	}
}

// One lean row the stream missed is one too many: the alarm fires on the
// first, as StrayRowsAlarm does on the first stray row. It says where to
// look, and that the rows it has not yet found are BacklogAlarm's once
// the backstop indexes them.
func TestTemplate_MissedRowsAlarmFiresOnAnyMissedRow(t *testing.T) {
	t.Parallel()
	tpl := load(t, nil)
	a := alarm(t, tpl, "MissedRowsAlarm")
	dims := map[string]string{}
	for _, d := range a.Dimensions {
		dims[d.Name] = d.Value
	}
	requireEmitted(t, "MissedRowsAlarm", a.Namespace, a.MetricName, dims)
	stray := alarm(t, tpl, "StrayRowsAlarm")
	require.Equal(t, "MissedRows", a.MetricName)
	a.MetricName, stray.MetricName = "", ""
	require.Equal(t, stray, a, "as StrayRowsAlarm: Sum over a minute above 0, no data is OK")
	require.Equal(t, "Sum", a.Statistic)
	require.Equal(t, "GreaterThanThreshold", a.ComparisonOperator)
	require.Zero(t, a.Threshold)
	require.Equal(t, 1, a.EvaluationPeriods)
	require.Equal(t, "notBreaching", a.TreatMissingData, "no sweep, or a backstop that found nothing")

	var props struct {
		AlarmDescription string
		AlarmActions     []string
	}
	resourceOf(t, tpl, "MissedRowsAlarm", "AWS::CloudWatch::Alarm", &props)
	for _, want := range []string{"stream", "backstop", "due index", "BacklogAlarm", "log names each key"} {
		require.Contains(t, props.AlarmDescription, want)
	}
	withTopic := load(t, map[string]string{"AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:alarms"})
	resourceOf(t, withTopic, "MissedRowsAlarm", "AWS::CloudWatch::Alarm", &props)
	require.Equal(t, []string{"arn:aws:sns:us-east-1:123456789012:alarms"}, props.AlarmActions, "it notifies the alarm topic")
}
