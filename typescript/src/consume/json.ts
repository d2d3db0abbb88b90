/**
 * A JSON reader that keeps what JSON.parse throws away and Go's
 * encoding/json, which the consumer's decoding must agree with, relies on:
 * every member of an object in order (duplicates included), each value's
 * place in the text (an EventBridge detail's members are passed on as
 * written), and a number's text (an attempt of 1.0 or 1e0 is no whole
 * number to Go). It accepts what Go's scanner accepts: RFC 8259, nesting
 * at most 10,000 deep; a string's invalid surrogates read as U+FFFD.
 */

/** A JSON value and where it is written: text.slice(start, end). */
export type Node =
  | { readonly kind: "object"; readonly start: number; end: number; readonly members: Member[] }
  | { readonly kind: "array"; readonly start: number; end: number; readonly items: Node[] }
  | { readonly kind: "string"; readonly start: number; readonly end: number; readonly value: string }
  | { readonly kind: "number"; readonly start: number; readonly end: number; readonly text: string }
  | { readonly kind: "true" | "false" | "null"; readonly start: number; readonly end: number };

/** An object's member, as written. */
export interface Member {
  readonly name: string;
  readonly value: Node;
}

/** Text that is not JSON as Go reads it. */
export class JsonSyntaxError extends Error {
  constructor(message: string, at: number) {
    super(`${message} at offset ${at}`);
    this.name = "JsonSyntaxError";
  }
}

/** Go's maxNestingDepth. */
const MAX_DEPTH = 10_000;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const ESCAPES: Readonly<Record<string, string>> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

type Container = Extract<Node, { kind: "object" | "array" }>;

/**
 * The JSON value that is the whole of text. Iterative, so that nesting as
 * deep as Go allows does not exhaust the stack.
 */
export function parse(text: string): Node {
  let i = 0;
  const fail = (what: string): never => {
    throw new JsonSyntaxError(what, i);
  };
  const skipSpace = () => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else return;
    }
  };
  const hex4 = (at: number): number => {
    const h = text.slice(at, at + 4);
    return /^[0-9A-Fa-f]{4}$/.test(h) ? parseInt(h, 16) : -1;
  };
  const readString = (): Extract<Node, { kind: "string" }> => {
    const start = i;
    if (text[i] !== '"') fail("expected a string");
    i++;
    let value = "";
    let run = i; // the start of the characters not yet copied
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text.charCodeAt(i);
      if (c === 0x22 || c === 0x5c) {
        // Raw text between escapes: a lone surrogate in it is what Go reads as invalid UTF-8.
        value += text.slice(run, i).replace(LONE_SURROGATE, "\uFFFD");
        if (c === 0x22) {
          i++;
          return { kind: "string", start, end: i, value };
        }
        const e = text[i + 1] ?? "";
        if (e === "u") {
          const r = hex4(i + 2);
          if (r < 0) fail("invalid \\u escape");
          i += 6;
          if (r >= 0xd800 && r <= 0xdfff) {
            // Go: a high surrogate followed by an escaped low one is a pair; anything else is U+FFFD.
            const low = text[i] === "\\" && text[i + 1] === "u" ? hex4(i + 2) : -1;
            if (r <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) {
              value += String.fromCharCode(r, low);
              i += 6;
            } else {
              value += "\uFFFD";
            }
          } else {
            value += String.fromCharCode(r);
          }
        } else {
          const unescaped = ESCAPES[e];
          if (unescaped === undefined) fail("invalid escape");
          value += unescaped;
          i += 2;
        }
        run = i;
        continue;
      }
      if (c < 0x20) fail("control character in string");
      i++;
    }
  };
  const readScalar = (): Node => {
    const start = i;
    const c = text[i];
    if (c === '"') return readString();
    for (const lit of ["true", "false", "null"] as const) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        return { kind: lit, start, end: i };
      }
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (m === null) return fail("expected a value");
    i += m[0].length;
    return { kind: "number", start, end: i, text: m[0] };
  };
  const readName = (): string => {
    skipSpace();
    const name = readString().value;
    skipSpace();
    if (text[i] !== ":") fail("expected ':'");
    i++;
    return name;
  };

  // Open containers, innermost last, each with the name of the member being read when an object.
  const stack: { node: Container; name: string }[] = [];
  for (;;) {
    skipSpace();
    let value: Node;
    const c = text[i];
    if (c === "{" || c === "[") {
      if (stack.length + 1 > MAX_DEPTH) fail("exceeded max depth");
      const start = i;
      i++;
      skipSpace();
      if (c === "{") {
        const node: Container = { kind: "object", start, end: -1, members: [] };
        if (text[i] !== "}") {
          stack.push({ node, name: readName() });
          continue;
        }
        i++;
        node.end = i;
        value = node;
      } else {
        const node: Container = { kind: "array", start, end: -1, items: [] };
        if (text[i] !== "]") {
          stack.push({ node, name: "" });
          continue;
        }
        i++;
        node.end = i;
        value = node;
      }
    } else {
      value = readScalar();
    }
    // Give the value to its container; close each container that ends here.
    for (;;) {
      const top = stack[stack.length - 1];
      if (top === undefined) {
        skipSpace();
        if (i !== text.length) fail("data after the value");
        return value;
      }
      if (top.node.kind === "object") top.node.members.push({ name: top.name, value });
      else top.node.items.push(value);
      skipSpace();
      if (text[i] === ",") {
        i++;
        if (top.node.kind === "object") top.name = readName();
        break;
      }
      if (text[i] !== (top.node.kind === "object" ? "}" : "]")) fail("expected ',' or the container's end");
      i++;
      top.node.end = i;
      stack.pop();
      value = top.node;
    }
  }
}

/**
 * A name as Go's encoding/json folds it to match a struct's field case
 * insensitively, for fields whose names are ASCII (all of this package's
 * are): a-z as A-Z, and the only other characters Unicode's simple case
 * folding puts with an ASCII letter, the Kelvin sign (with K) and the
 * long s (with S). Everything else stays as it is and so matches no ASCII
 * name: not ß (ss is no simple folding), nor the Turkish dotted and
 * dotless i, which Go's unicode.SimpleFold leaves alone.
 */
export function foldName(name: string): string {
  return name.replace(/[a-z\u212A\u017F]/g, (c) => (c === "\u212A" ? "K" : c === "\u017F" ? "S" : c.toUpperCase()));
}

/**
 * The members of obj that Go's json.Unmarshal would store in a struct
 * whose fields have the JSON names given (field → name), in order, as
 * [field, value]: an exact name first, else one equal when folded; the
 * others are ignored.
 */
export function structMembers<F extends string>(obj: Extract<Node, { kind: "object" }>, fields: Readonly<Record<F, string>>): [F, Node][] {
  const exact = new Map<string, F>();
  const folded = new Map<string, F>();
  for (const [field, name] of Object.entries(fields) as [F, string][]) {
    exact.set(name, field);
    folded.set(foldName(name), field);
  }
  const out: [F, Node][] = [];
  for (const m of obj.members) {
    const f = exact.get(m.name) ?? folded.get(foldName(m.name));
    if (f !== undefined) out.push([f, m.value]);
  }
  return out;
}

/**
 * A string as Go's encoder writes it with HTML escaping off: quotes,
 * backslashes and control characters escaped (\b \f \n \r \t by name, the
 * rest as \u00XX), U+2028 and U+2029 escaped, a lone surrogate U+FFFD.
 */
export function goString(s: string): string {
  let out = '"';
  for (const ch of s.replace(LONE_SURROGATE, "\uFFFD")) {
    const c = ch.codePointAt(0) as number;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (c < 0x20) {
      const named: Record<string, string> = { "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
      out += named[ch] ?? "\\u00" + c.toString(16).padStart(2, "0");
    } else if (c === 0x2028 || c === 0x2029) out += "\\u" + c.toString(16);
    else out += ch;
  }
  return out + '"';
}
