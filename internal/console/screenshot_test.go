package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwschemas "github.com/aws/aws-sdk-go-v2/service/cloudwatch/schemas"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/awstest"
	"github.com/outflowhq/outflow/internal/console"
)

// screenshotPath is the screenshot the README shows.
const screenshotPath = "../../docs/console.png"

// screenshotEnv, set to 1 (make screenshot), writes the screenshot this
// test takes to screenshotPath. Without it the test only checks that the
// one in docs was taken of the pages as they are: the tests never write
// to the tree, so CI runs on a clean clone and leaves it clean.
const screenshotEnv = "OUTFLOW_SCREENSHOT"

// pagesKeyword names the PNG text chunk that records the digest of the
// pages a screenshot was taken of.
const pagesKeyword = "outflow-pages-sha256"

// pagesDigest is a digest of the console's templates and stylesheet,
// which decide what its pages look like.
func pagesDigest(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, dir := range []string{"templates", "assets"} {
		err := fs.WalkDir(os.DirFS(dir), ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(filepath.Join(dir, path))
			h.Write([]byte(dir + "/" + path + "\x00"))
			h.Write(b)
			return err
		})
		require.NoError(t, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// withText adds a tEXt chunk keyword=text before a PNG's IEND chunk.
func withText(pngBytes []byte, keyword, text string) []byte {
	data := append([]byte(keyword+"\x00"), text...)
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, "tEXt"...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	iend := len(pngBytes) - 12
	return append(append(append([]byte{}, pngBytes[:iend]...), chunk...), pngBytes[iend:]...)
}

// textOf reads the tEXt chunk keyword of a PNG.
func textOf(pngBytes []byte, keyword string) (string, error) {
	for i := 8; i+12 <= len(pngBytes); {
		n := int(binary.BigEndian.Uint32(pngBytes[i:]))
		if i+12+n > len(pngBytes) {
			break
		}
		typ, data := string(pngBytes[i+4:i+8]), pngBytes[i+8:i+8+n]
		if k, v, ok := bytes.Cut(data, []byte{0}); typ == "tEXt" && ok && string(k) == keyword {
			return string(v), nil
		}
		i += 12 + n
	}
	return "", errors.New("no " + keyword + " text in the PNG")
}

// putMetrics publishes, for the table, an hour of the stack's metrics
// into the endpoint's CloudWatch, as the functions' EMF logs would.
func putMetrics(t *testing.T, table string, now time.Time) *cloudwatch.Client {
	t.Helper()
	// The Query protocol: the moto server does not route the SDK's
	// default (CBOR).
	cw := cloudwatch.NewFromConfig(awstest.TestConfig(t), func(o *cloudwatch.Options) {
		o.Protocol = awsquery.New(cwschemas.GraniteServiceVersion20100801)
	})
	var data []cwtypes.MetricDatum
	for i := range 35 {
		at := now.Add(-time.Duration(35-i) * 5 * time.Minute)
		for name, v := range map[string]float64{
			"Delivered": float64(400 + 30*(i%7) + 8*i), "Retried": float64((i * 7) % 5), "DeadLettered": float64(i / 34 * 6),
			"OldestDueAgeMs": float64(900 + 350*((i*3)%7)),
		} {
			data = append(data, cwtypes.MetricDatum{MetricName: aws.String(name), Timestamp: aws.Time(at), Value: aws.Float64(v),
				Dimensions: []cwtypes.Dimension{{Name: aws.String("Table"), Value: aws.String(table)}}})
		}
	}
	_, err := cw.PutMetricData(context.Background(), &cloudwatch.PutMetricDataInput{Namespace: aws.String("Outflow"), MetricData: data})
	require.NoError(t, err)
	return cw
}

func TestBrowser_TheREADMEScreenshotIsOfTheCurrentPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cw := putMetrics(t, e.table, time.Now())
	c := e.serve(t, func(cfg *console.Config) { cfg.Metrics = &console.Metrics{API: cw, Namespace: "Outflow"} })
	ctx := browser(t)
	act(t, ctx, chromedp.EmulateViewport(1280, 740))
	nav(t, ctx, c.url+"/", "#charts")
	require.Equal(t, 4, count(t, ctx, "#charts polyline"), "a line for each metric CloudWatch holds")
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	_, err = png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	require.Less(t, len(shot), 512<<10, "small enough for the repository")

	digest := pagesDigest(t)
	if os.Getenv(screenshotEnv) == "1" {
		require.NoError(t, os.WriteFile(screenshotPath, withText(shot, pagesKeyword, digest), 0o644))
		t.Logf("wrote %s (%d bytes)", screenshotPath, len(shot))
	}
	docs, err := os.ReadFile(screenshotPath)
	require.NoError(t, err, "the README's screenshot: make screenshot takes it")
	taken, err := textOf(docs, pagesKeyword)
	require.NoError(t, err)
	require.Equal(t, digest, taken, "the console's pages changed since %s was taken: run make screenshot and commit it", screenshotPath)
}

func TestBrowser_ChartsGiveWayToANoteWhereCloudWatchCannotBeRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.serve(t, func(cfg *console.Config) { cfg.Metrics = &console.Metrics{API: deniedMetrics{}, Namespace: "Outflow"} })
	ctx := browser(t)
	nav(t, ctx, c.url+"/", "#charts-note")
	require.Contains(t, text(t, ctx, "#charts-note"), "CloudWatch cannot be read with these credentials")
	require.Contains(t, text(t, ctx, "#charts-note"), "AccessDenied")
	require.Equal(t, "6", text(t, ctx, "#dead-total"), "the rest of the overview is there")
}

// deniedMetrics is CloudWatch refusing credentials without
// cloudwatch:GetMetricData (fault injection: moto allows everything).
type deniedMetrics struct{}

func (deniedMetrics) GetMetricData(context.Context, *cloudwatch.GetMetricDataInput, ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	return nil, errors.New("AccessDenied: not authorized to perform cloudwatch:GetMetricData")
}
