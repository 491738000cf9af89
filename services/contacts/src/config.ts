import { baseServiceConfigSpec, loadConfig, type Env } from '@mailfleet/kit';

/** The contacts service's configuration: the common fields (ports, Mongo, NATS, logging, shutdown). */
export function contactsConfigSpec() {
  return { ...baseServiceConfigSpec('contacts') };
}

export function loadContactsConfig(env: Env) {
  return loadConfig(contactsConfigSpec(), env);
}
export type ContactsConfig = ReturnType<typeof loadContactsConfig>;
