import { describe, expect, it } from 'vitest';
import { escapeHtml, placeholdersOf, renderEmail, renderTemplate } from '../../src/domain/render.js';

describe('placeholders', () => {
  it('finds {{name}} placeholders, with or without spaces, once each', () => {
    expect(placeholdersOf('Hi {{ first }} {{last}}, {{first}}! {{ a.b }} {{x-y}}')).toEqual(['first', 'last', 'a.b', 'x-y']);
  });
  it('leaves other braces alone (CSS, code, empty or malformed placeholders)', () => {
    const text = 'a { color: red } {{}} {{ 1abc }} {{ not valid }} {single}';
    expect(placeholdersOf(text)).toEqual([]);
    expect(renderTemplate(text, {}, 'html')).toEqual({ output: text, missing: [] });
  });
});

describe('renderTemplate', () => {
  it('escapes values in HTML and leaves them raw in text', () => {
    const vars = { name: '<b>Tom & "Jerry"</b>\'s' };
    expect(renderTemplate('<p>Hello {{name}}</p>', vars, 'html').output).toBe('<p>Hello &lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt;&#39;s</p>');
    expect(renderTemplate('Hello {{name}}', vars, 'text').output).toBe('Hello <b>Tom & "Jerry"</b>\'s');
  });
  it('renders numbers, booleans, null and nested values; flat dotted keys win over nesting', () => {
    const vars = { n: 3, ok: true, nothing: null, user: { name: 'Ann', tags: ['x'] }, 'user.name': 'Flat' };
    expect(renderTemplate('{{n}} {{ok}} [{{nothing}}] {{user.name}} {{user.tags}}', vars, 'text').output).toBe('3 true [] Flat ["x"]');
    expect(renderTemplate('{{user.name}}', { user: { name: 'Ann' } }, 'text').output).toBe('Ann');
  });
  it('reports missing variables and keeps them as written', () => {
    expect(renderTemplate('Hi {{a}} {{b}} {{a}}', { b: 1 }, 'text')).toEqual({ output: 'Hi {{a}} 1 {{a}}', missing: ['a'] });
  });
  it('does not let a value inject placeholders of its own', () => {
    expect(renderTemplate('{{a}} {{b}}', { a: '{{b}}', b: 'B' }, 'text').output).toBe('{{b}} B');
  });
  it('escapeHtml covers the five special characters', () => {
    expect(escapeHtml(`&<>"'`)).toBe('&amp;&lt;&gt;&quot;&#39;');
  });
});

describe('renderEmail', () => {
  it('sends content as given when there is neither template nor variables', () => {
    expect(renderEmail({ subject: 'Hi {{name}}', html: '<p>{{name}}</p>' }, { usesTemplate: false })).toEqual({
      ok: true, subject: 'Hi {{name}}', html: '<p>{{name}}</p>', text: undefined,
    });
  });
  it('substitutes subject, html and text when variables are given', () => {
    const r = renderEmail({ subject: 'Hi {{name}}', html: '<p>{{name}}</p>', text: 'T {{name}}' }, { variables: { name: 'A&B' }, usesTemplate: false });
    expect(r).toEqual({ ok: true, subject: 'Hi A&B', html: '<p>A&amp;B</p>', text: 'T A&B' });
  });
  it('is a rendering failure when a template placeholder has no value', () => {
    const r = renderEmail({ subject: 'Hi {{name}}', text: 'Code {{code}}' }, { usesTemplate: true });
    expect(r.ok).toBe(false);
    expect(r).toMatchObject({ missing: ['name', 'code'] });
    expect(!r.ok && r.error).toContain('{{name}}, {{code}}');
  });
  it('keeps a subject on one line and refuses an empty one', () => {
    expect(renderEmail({ subject: 'a\r\n  b\nc', text: 'x' }, { usesTemplate: false })).toMatchObject({ ok: true, subject: 'a b c' });
    expect(renderEmail({ subject: '{{s}}', text: 'x' }, { variables: { s: '' }, usesTemplate: false })).toMatchObject({ ok: false });
  });
});
