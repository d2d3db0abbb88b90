/**
 * The project's patched moto server, started as the Go tests start it
 * (internal/moto/moto.go) and the Python tests (python/tests/conftest.py):
 * server.py, after cloudformation.py, from the project's .venv, on a
 * loopback listening socket it inherits as descriptor 3 (OUTFLOW_MOTO_FD=3),
 * so its conditional writes are atomic and the port is never free for
 * another process to take between choosing it and moto serving on it. It
 * runs in its own process group, killed at the end, and dies with this
 * process (PR_SET_PDEATHSIG, set in the child before moto starts).
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { ROOT } from "./vectors.js";

const MOTO = ROOT + "internal/moto/";

/** The Python that has moto: $OUTFLOW_MOTO_PYTHON, else the project virtualenv (make venv-moto installs it), as moto.go finds it. */
export function motoPython(): string | null {
  const env = process.env["OUTFLOW_MOTO_PYTHON"];
  if (env) return env;
  return existsSync(ROOT + ".venv/bin/moto_server") ? ROOT + ".venv/bin/python" : null;
}

/**
 * Run in the child before moto: descriptor 3 back in blocking mode (node's
 * listening sockets are non-blocking, and the flag is the socket's, shared
 * with the child; Go and Python hand over a blocking one), and SIGTERM when
 * this process dies, exiting at once if it already has.
 */
const PRELUDE = `
import ctypes as _ctypes, os as _os, signal as _signal, sys as _sys
_os.set_blocking(3, True)
if _sys.platform.startswith("linux"):
    _ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, _signal.SIGTERM)  # PR_SET_PDEATHSIG
    if _os.getppid() != int(_os.environ.pop("OUTFLOW_MOTO_PARENT", "0")):
        _os._exit(1)
`;

export interface Moto {
  url: string;
  stop(): Promise<void>;
}

function listen(): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen({ port: 0, host: "127.0.0.1", backlog: 128 }, () => resolve(server));
  });
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group is gone
  }
}

/** A moto server, or null when moto is not installed (the live tests are then skipped). */
export async function startMoto(): Promise<Moto | null> {
  const endpoint = process.env["OUTFLOW_TEST_ENDPOINT"];
  if (endpoint) return { url: endpoint, stop: async () => {} };
  const python = motoPython();
  if (python === null) return null;
  const code = PRELUDE + readFileSync(MOTO + "cloudformation.py", "utf8") + "\n" + readFileSync(MOTO + "server.py", "utf8");
  const server = await listen();
  const port = (server.address() as net.AddressInfo).port;
  // The listening socket's descriptor, given to the child as its descriptor
  // 3 (a net.Server itself is not a stdio stream spawn can share).
  const fd = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) {
    server.close();
    throw new Error("no descriptor for the listening socket on this platform");
  }
  const out = process.env["OUTFLOW_MOTO_LOG"] ? "inherit" : "ignore";
  const child = spawn(python, ["-c", code, "-H", "127.0.0.1", "-p", String(port)], {
    env: { ...process.env, OUTFLOW_MOTO_FD: "3", OUTFLOW_MOTO_PARENT: String(process.pid) },
    stdio: ["ignore", out, out, fd],
    detached: true, // its own process group (and session)
  });
  // moto has its own copy now; ours closed, a moto that died leaves
  // connections refused rather than queued on a socket nobody serves.
  server.close();
  const onExit = () => killGroup(child, "SIGKILL");
  process.once("exit", onExit);
  let exited: number | null | undefined;
  const done = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exited = code ?? (signal ? -1 : null);
      resolve();
    });
  });
  const stop = async () => {
    process.removeListener("exit", onExit);
    if (exited !== undefined) return;
    killGroup(child, "SIGTERM");
    const timer = setTimeout(() => killGroup(child, "SIGKILL"), 5000);
    await done;
    clearTimeout(timer);
  };
  const url = `http://127.0.0.1:${port}`;
  // Its start is seconds of CPU (importing moto); on 2 loaded cores it took
  // over 30 s for the Go tests, so the bound is generous.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (exited !== undefined) {
      await stop();
      throw new Error(`moto server exited with ${exited}`);
    }
    try {
      const resp = await fetch(url + "/moto-api/", { signal: AbortSignal.timeout(5000) });
      await resp.arrayBuffer();
      break;
    } catch (e) {
      if (Date.now() > deadline) {
        await stop();
        throw e;
      }
      await sleep(50);
    }
  }
  return { url, stop };
}
