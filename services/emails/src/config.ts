import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The emails service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function emailsConfigSpec() {
  return { ...baseServiceConfigSpec('emails') };
}

export function loadEmailsConfig(env: Env) {
  return loadConfig(emailsConfigSpec(), env);
}
export type EmailsConfig = ReturnType<typeof loadEmailsConfig>;
