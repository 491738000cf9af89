import fs from 'node:fs';

/**
 * The environment variable through which the platform that started this process (deploy/src/platform.ts) hands over
 * its gRPC port: the number of an inherited descriptor of a socket bound to that port.
 */
export const HELD_PORT_FD_ENV = 'MAILFLEET_HELD_PORT_FD';

/**
 * Lets go of the port the platform held for this process, right before the gRPC server binds it. The default
 * gRPC ports lie inside Linux's ephemeral range: while nothing is bound to one, the kernel may give it to any
 * outgoing connection (another service's first connection to the store, say), and the bind then fails with
 * EADDRINUSE. A bound port is never given out, so the platform binds it before the services start and this
 * process closes that socket only when its own server is about to take its place. Without the variable, or with a
 * descriptor that is not a socket, it does nothing.
 */
export function releaseHeldPort(env: NodeJS.ProcessEnv = process.env): void {
  const value = env[HELD_PORT_FD_ENV];
  if (value === undefined) return;
  delete env[HELD_PORT_FD_ENV];
  const fd = Number(value);
  if (!Number.isInteger(fd) || fd < 3) return;
  try {
    if (!fs.fstatSync(fd).isSocket()) return;
    fs.closeSync(fd);
  } catch {
    // not open: nothing to let go of
  }
}
