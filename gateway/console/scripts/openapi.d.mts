export function gatewayOpenApi(gateway: { buildApp: unknown; v1Areas: unknown }): Promise<Record<string, unknown>>;
export function schemaSource(gateway: { buildApp: unknown; v1Areas: unknown }): Promise<string>;
