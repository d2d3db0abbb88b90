package streams

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// API is the part of the DynamoDB Streams client the poller uses.
type API interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// Poller reads a stream shard by shard, as an event source mapping does:
// shards open when the poller starts begin at the chosen position, shards
// that appear later from their start, and each record is returned once.
type Poller struct {
	api   API
	arn   string
	start types.ShardIteratorType
	// iterators holds the next iterator of every open shard; closed
	// remembers shards that are fully read.
	iterators map[string]string
	closed    map[string]bool
	first     bool
}

// NewPoller returns a poller of the stream arn. start is where shards that
// exist at the first poll begin: LATEST (only new records, like a new
// mapping) or TRIM_HORIZON (everything retained).
func NewPoller(api API, arn string, start types.ShardIteratorType) *Poller {
	return &Poller{api: api, arn: arn, start: start, iterators: map[string]string{}, closed: map[string]bool{}, first: true}
}

// ARN is the stream the poller reads.
func (p *Poller) ARN() string { return p.arn }

// Poll returns the records written since the last poll, per shard in
// order, with at most limit records per shard read.
func (p *Poller) Poll(ctx context.Context, limit int32) ([]types.Record, error) {
	if err := p.discover(ctx); err != nil {
		return nil, err
	}
	var out []types.Record
	for shard, it := range p.iterators {
		res, err := p.api.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(limit)})
		if err != nil {
			return out, fmt.Errorf("get records of shard %s: %w", shard, err)
		}
		out = append(out, res.Records...)
		if res.NextShardIterator == nil {
			delete(p.iterators, shard)
			p.closed[shard] = true
			continue
		}
		p.iterators[shard] = *res.NextShardIterator
	}
	return out, nil
}

// discover starts an iterator for every shard not seen before.
func (p *Poller) discover(ctx context.Context) error {
	var after *string
	for {
		desc, err := p.api.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.arn), ExclusiveStartShardId: after})
		if err != nil {
			return fmt.Errorf("describe stream: %w", err)
		}
		for _, sh := range desc.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if _, open := p.iterators[id]; open || p.closed[id] {
				continue
			}
			pos := types.ShardIteratorTypeTrimHorizon
			if p.first {
				pos = p.start
			}
			it, err := p.api.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.arn), ShardId: sh.ShardId, ShardIteratorType: pos})
			if err != nil {
				return fmt.Errorf("iterator for shard %s: %w", id, err)
			}
			p.iterators[id] = aws.ToString(it.ShardIterator)
		}
		after = desc.StreamDescription.LastEvaluatedShardId
		if after == nil {
			break
		}
	}
	p.first = false
	return nil
}
