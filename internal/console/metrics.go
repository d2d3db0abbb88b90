package console

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// MetricsAPI is the CloudWatch call the charts make.
type MetricsAPI interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

// Metrics reads the stack's metrics: those the functions publish in
// Namespace (the template's MetricsNamespace, Outflow by default) with
// the dimension Table.
type Metrics struct {
	API       MetricsAPI
	Namespace string
}

// metricsTTL is how long charts are kept: their period, so a reload
// within it would show the same points.
const metricsTTL = 5 * time.Minute

// chartSpan is how far back the charts go, in metricsTTL periods.
const (
	chartSpan   = 3 * time.Hour
	chartPeriod = int32(metricsTTL / time.Second)
)

// chartMetrics are the charts, in order: the metric and its statistic.
var chartMetrics = []struct{ name, stat, title string }{
	{"Delivered", "Sum", "Delivered"},
	{"Retried", "Sum", "Retried"},
	{"DeadLettered", "Sum", "Dead-lettered"},
	{"OldestDueAgeMs", "Maximum", "Oldest due age (ms)"},
}

// Charts are the overview's small charts.
type Charts []Chart

// Chart is one metric over the last hours, drawn as an SVG polyline in a
// 300×60 box.
type Chart struct {
	Title  string
	Points string
	Max    float64
	Last   float64
	Empty  bool
}

// A failed read is remembered for metricsFailTTL: credentials that cannot
// read CloudWatch would otherwise cost a request, with the SDK's retries,
// at every load of every tab. A read that takes longer than metricsWait
// is given up, so a CloudWatch that does not answer slows the overview
// (and the overviews waiting on the cache's lock) by that much at most.
const (
	metricsFailTTL = time.Minute
	metricsWait    = 5 * time.Second
)

// chartCache keeps the charts for metricsTTL, so that refreshes and tabs
// do not multiply CloudWatch requests, and a failure for metricsFailTTL.
type chartCache struct {
	mu     sync.Mutex
	at     time.Time
	charts Charts
	note   string // why there are no charts, when the last read failed
}

func (c *chartCache) get(ctx context.Context, m *Metrics, table string, now time.Time) (Charts, string) {
	if m == nil {
		return nil, "No CloudWatch metrics configured."
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch age := now.Sub(c.at); {
	case c.charts != nil && age < metricsTTL:
		return c.charts, ""
	case c.note != "" && age < metricsFailTTL:
		return nil, c.note
	}
	ctx, cancel := context.WithTimeout(ctx, metricsWait)
	defer cancel()
	charts, err := m.read(ctx, table, now)
	c.at = now
	if err != nil {
		c.charts, c.note = nil, "CloudWatch cannot be read with these credentials, so there are no charts ("+err.Error()+")."
		return nil, c.note
	}
	c.charts, c.note = charts, ""
	return charts, ""
}

// read makes one GetMetricData request for every chart.
func (m *Metrics) read(ctx context.Context, table string, now time.Time) (Charts, error) {
	in := &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(now.Add(-chartSpan)), EndTime: aws.Time(now), ScanBy: types.ScanByTimestampAscending,
	}
	for i, c := range chartMetrics {
		in.MetricDataQueries = append(in.MetricDataQueries, types.MetricDataQuery{
			Id: aws.String("m" + strconv.Itoa(i)),
			MetricStat: &types.MetricStat{
				Metric: &types.Metric{Namespace: aws.String(m.Namespace), MetricName: aws.String(c.name),
					Dimensions: []types.Dimension{{Name: aws.String("Table"), Value: aws.String(table)}}},
				Period: aws.Int32(chartPeriod), Stat: aws.String(c.stat),
			},
		})
	}
	series := map[string][]point{}
	for {
		out, err := m.API.GetMetricData(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("get metric data: %w", err)
		}
		for _, r := range out.MetricDataResults {
			id := aws.ToString(r.Id)
			for i := range min(len(r.Timestamps), len(r.Values)) {
				series[id] = append(series[id], point{r.Timestamps[i], r.Values[i]})
			}
		}
		if out.NextToken == nil {
			break
		}
		in.NextToken = out.NextToken
	}
	charts := make(Charts, len(chartMetrics))
	for i, c := range chartMetrics {
		charts[i] = draw(c.title, series["m"+strconv.Itoa(i)], now.Add(-chartSpan), chartSpan)
	}
	return charts, nil
}

type point struct {
	at time.Time
	v  float64
}

// draw scales the points into a 300×60 box, time across, 0 to the
// largest value up.
func draw(title string, pts []point, from time.Time, span time.Duration) Chart {
	c := Chart{Title: title, Empty: len(pts) == 0}
	for _, p := range pts {
		c.Max = max(c.Max, p.v)
	}
	var b strings.Builder
	for i, p := range pts {
		x := 300 * float64(p.at.Sub(from)) / float64(span)
		y := 58.0
		if c.Max > 0 {
			y = 58 - 56*p.v/c.Max
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", min(max(x, 0), 300), y)
		c.Last = p.v
	}
	c.Points = b.String()
	return c
}
