/** A stand-in DynamoDB client for the offline vectors: GetItem finds the vector's table items; writes are refused (the offline vectors send nothing). */

import assert from "node:assert/strict";
import {
  GetItemCommand,
  type GetItemCommandOutput,
  type PutItemCommand,
  type PutItemCommandOutput,
  type TransactWriteItemsCommand,
  type TransactWriteItemsCommandOutput,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBClientLike } from "../src/index.js";
import { toSdk, type Json } from "./vectors.js";

export class FakeDynamoDB implements DynamoDBClientLike {
  readonly items = new Map<string, Json>();
  readonly reads: string[] = [];

  constructor(items: readonly Json[] = []) {
    for (const i of items) this.items.set(i.pk.S as string, toSdk(i));
  }

  send(command: GetItemCommand): Promise<GetItemCommandOutput>;
  send(command: PutItemCommand): Promise<PutItemCommandOutput>;
  send(command: TransactWriteItemsCommand): Promise<TransactWriteItemsCommandOutput>;
  async send(command: GetItemCommand | PutItemCommand | TransactWriteItemsCommand): Promise<GetItemCommandOutput | PutItemCommandOutput | TransactWriteItemsCommandOutput> {
    if (!(command instanceof GetItemCommand)) throw new assert.AssertionError({ message: "the offline vectors write nothing" });
    assert.equal(command.input.ConsistentRead, true, "reads are strongly consistent");
    const key = command.input.Key?.["pk"]?.S as string;
    this.reads.push(key);
    const item = this.items.get(key);
    return item !== undefined ? { Item: item, $metadata: {} } : { $metadata: {} };
  }
}
