// Command app is a newcomer's own producer: it reads nothing but the
// environment `outflow local` prints (through the SDK's own lookup) and
// stages one row on each route it is given as arguments, "route" or
// "route:group".
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/outflowhq/outflow"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, routes []string) error {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	// moto's response checksums do not always match their bodies.
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	// OUTFLOW_ORDERED is "none" or route[=block|skip],...: the producer
	// wants the route names. An empty list says none; nil would read them
	// from the table, where a dispatcher that has not run yet publishes
	// nothing.
	ordered := []string{}
	for _, r := range strings.Split(os.Getenv("OUTFLOW_ORDERED"), ",") {
		if name, _, _ := strings.Cut(r, "="); strings.TrimSpace(name) != "" && strings.TrimSpace(name) != "none" {
			ordered = append(ordered, strings.TrimSpace(name))
		}
	}
	shards, _ := strconv.Atoi(os.Getenv("OUTFLOW_SHARDS"))
	p, err := outflow.NewProducer(client, outflow.Config{
		Table: os.Getenv("OUTFLOW_TABLE"), Routes: os.Getenv("OUTFLOW_ROUTES"), Ordered: ordered, Shards: shards,
	})
	if err != nil {
		return err
	}
	for i, r := range routes {
		queue, group, _ := strings.Cut(r, ":")
		keys, err := p.Put(ctx, outflow.Row{Queue: queue, Group: group, Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
		if err != nil {
			return err
		}
		fmt.Println("staged", keys[0], "on", queue)
	}
	return nil
}
