import { beforeAll, describe, expect, it } from 'vitest';
import { apiAt, createTeam, gatewayUrl } from './helpers.js';

const api = apiAt(gatewayUrl());

interface Template { id: string; name: string; subject: string; html: string | null; content: string | null; teamId: string; createdAt: string; updatedAt: string }

let token: string;
let teamId: string;
beforeAll(async () => {
  ({ token, teamId } = await createTeam('Templates Team'));
});

describe('templates (SPEC 4.6)', () => {
  it('creates, lists newest first, reads, updates and deletes', async () => {
    const first = await api('POST', '/v1/templates', { token, body: { name: 'Welcome', subject: 'Hi {{name}}', html: '<p>Hi {{name}}</p>' } });
    expect(first.status).toBe(200);
    const id1 = (first.body as { id: string }).id;
    expect(first.body).toEqual({ id: id1 });
    const id2 = ((await api('POST', '/v1/templates', { token, body: { name: 'Receipt', subject: 'Receipt', content: 'Thanks' } })).body as { id: string }).id;

    const list = await api('GET', '/v1/templates', { token });
    expect(list.status).toBe(200);
    const items = list.body as Template[];
    expect(items.map((t) => t.id)).toEqual([id2, id1]);
    expect(items[1]).toEqual({
      id: id1, name: 'Welcome', subject: 'Hi {{name}}', html: '<p>Hi {{name}}</p>', content: null, teamId,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/), updatedAt: expect.any(String),
    });

    const patched = await api('PATCH', `/v1/templates/${id1}`, { token, body: { content: 'Hi {{name}}', name: 'Welcome v2' } });
    expect(patched).toMatchObject({ status: 200, body: { success: true } });
    const got = await api('GET', `/v1/templates/${id1}`, { token });
    expect(got.body).toMatchObject({ id: id1, name: 'Welcome v2', subject: 'Hi {{name}}', html: '<p>Hi {{name}}</p>', content: 'Hi {{name}}' });

    expect(await api('DELETE', `/v1/templates/${id2}`, { token })).toMatchObject({ status: 200, body: { success: true } });
    const gone = await api('GET', `/v1/templates/${id2}`, { token });
    expect(gone).toMatchObject({ status: 404, body: { code: 'NOT_FOUND', message: 'Template not found' } });
  });

  it('validates, and hides other teams\' templates behind 404', async () => {
    const noName = await api('POST', '/v1/templates', { token, body: { name: '', subject: 'x' } });
    expect(noName.status).toBe(400);
    expect((noName.body as { code: string }).code).toBe('BAD_REQUEST');
    expect((await api('POST', '/v1/templates', { token, body: { name: 'x' } })).status).toBe(400);

    const other = await createTeam('Other Templates Team');
    const id = ((await api('POST', '/v1/templates', { token: other.token, body: { name: 'Theirs', subject: 's' } })).body as { id: string }).id;
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'x' }], ['DELETE', undefined]] as const) {
      const res = await api(method, `/v1/templates/${id}`, { token, body });
      expect(res, method).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    }
    expect(((await api('GET', '/v1/templates', { token })).body as Template[]).some((t) => t.id === id)).toBe(false);
  });
});
