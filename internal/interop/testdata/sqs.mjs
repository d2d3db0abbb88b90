// A minimal SQS client for the interop test's TypeScript consumer: the
// TypeScript package depends on @aws-sdk/client-dynamodb alone, so the
// consumer speaks SQS's JSON protocol (what @aws-sdk/client-sqs sends)
// itself, signed with the SDK's own SigV4 signer (@smithy/signature-v4,
// which the DynamoDB client brings) and the DynamoDB client's resolved
// credentials and region. Each call returns SQS's JSON answer, as
// @aws-sdk/client-sqs's would: { Messages: [{ MessageId, ReceiptHandle,
// Body, Attributes, MessageAttributes }] } for ReceiveMessage.

import { createHash, createHmac } from "node:crypto";

/** A SHA-256 in the shape the signer takes (@aws-crypto/sha256-js's). */
class Sha256 {
  constructor(secret) {
    this.hash = secret ? createHmac("sha256", secret) : createHash("sha256");
  }
  update(data) {
    this.hash.update(typeof data === "string" ? Buffer.from(data, "utf8") : data);
  }
  async digest() {
    return new Uint8Array(this.hash.digest());
  }
}

export class SQS {
  /**
   * @param {object} dynamodb a DynamoDBClient: its credentials and region
   * @param {(name: string) => any} require a require that resolves the package's dependencies
   */
  constructor(dynamodb, require) {
    const { SignatureV4 } = require("@smithy/signature-v4");
    this.config = dynamodb.config;
    this.SignatureV4 = SignatureV4;
  }

  async call(operation, input) {
    const region = await this.config.region();
    const endpoint = new URL(process.env.AWS_ENDPOINT_URL_SQS || process.env.AWS_ENDPOINT_URL || `https://sqs.${region}.amazonaws.com`);
    const signer = new this.SignatureV4({ service: "sqs", region, credentials: this.config.credentials, sha256: Sha256 });
    const body = JSON.stringify(input);
    const request = await signer.sign({
      method: "POST",
      protocol: endpoint.protocol,
      hostname: endpoint.hostname,
      port: endpoint.port ? Number(endpoint.port) : undefined,
      path: endpoint.pathname,
      headers: {
        host: endpoint.host,
        "content-type": "application/x-amz-json-1.0",
        "x-amz-target": `AmazonSQS.${operation}`,
      },
      body,
    });
    const res = await fetch(endpoint, { method: "POST", headers: request.headers, body, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`SQS ${operation}: HTTP ${res.status}: ${text}`);
    return text ? JSON.parse(text) : {};
  }

  receiveMessage(input) {
    return this.call("ReceiveMessage", input);
  }

  deleteMessageBatch(input) {
    return this.call("DeleteMessageBatch", input);
  }
}
