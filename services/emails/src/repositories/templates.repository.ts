import type { Collection, Db } from 'mongodb';

export interface TemplateRecord {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly subject: string;
  readonly html?: string | undefined;
  readonly content?: string | undefined;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

interface TemplateDoc {
  _id: string;
  teamId: string;
  name: string;
  subject: string;
  html?: string;
  content?: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface TemplatePatch {
  name?: string | undefined;
  subject?: string | undefined;
  html?: string | undefined;
  content?: string | undefined;
}

export interface TemplatesRepository {
  ensureIndexes(): Promise<void>;
  create(t: TemplateRecord): Promise<TemplateRecord>;
  list(teamId: string): Promise<TemplateRecord[]>;
  get(teamId: string, id: string): Promise<TemplateRecord | undefined>;
  update(teamId: string, id: string, patch: TemplatePatch, now: Date): Promise<TemplateRecord | undefined>;
  delete(teamId: string, id: string): Promise<boolean>;
}

function toRecord(d: TemplateDoc): TemplateRecord {
  return { id: d._id, teamId: d.teamId, name: d.name, subject: d.subject, html: d.html, content: d.content, createdAt: d.createdAt, updatedAt: d.updatedAt };
}

export function createTemplatesRepository(db: Db): TemplatesRepository {
  const col: Collection<TemplateDoc> = db.collection<TemplateDoc>('templates');
  return {
    async ensureIndexes() {
      await col.createIndex({ teamId: 1, createdAt: -1 }, { name: 'team_created' });
    },
    async create(t) {
      const doc: TemplateDoc = {
        _id: t.id, teamId: t.teamId, name: t.name, subject: t.subject, createdAt: t.createdAt, updatedAt: t.updatedAt,
        ...(t.html !== undefined ? { html: t.html } : {}),
        ...(t.content !== undefined ? { content: t.content } : {}),
      };
      await col.insertOne(doc);
      return toRecord(doc);
    },
    async list(teamId) {
      return (await col.find({ teamId }).sort({ createdAt: -1, _id: -1 }).toArray()).map(toRecord);
    },
    async get(teamId, id) {
      const d = await col.findOne({ _id: id, teamId });
      return d ? toRecord(d) : undefined;
    },
    async update(teamId, id, patch, now) {
      const set: Partial<TemplateDoc> = { updatedAt: now };
      if (patch.name !== undefined) set.name = patch.name;
      if (patch.subject !== undefined) set.subject = patch.subject;
      if (patch.html !== undefined) set.html = patch.html;
      if (patch.content !== undefined) set.content = patch.content;
      const d = await col.findOneAndUpdate({ _id: id, teamId }, { $set: set }, { returnDocument: 'after' });
      return d ? toRecord(d) : undefined;
    },
    async delete(teamId, id) {
      return (await col.deleteOne({ _id: id, teamId })).deletedCount === 1;
    },
  };
}
