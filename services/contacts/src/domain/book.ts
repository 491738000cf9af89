import { InvalidArgumentError } from '@mailfleet/kit';
import { checkProperties, orThrow, type Properties } from './contact.js';

export interface ContactBook {
  readonly id: string;
  readonly teamId: string;
  readonly name: string;
  readonly emoji: string;
  readonly properties: Properties;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface BookChange {
  readonly name?: string;
  readonly emoji?: string;
  readonly properties?: Properties;
}

/** The emoji a book gets when none is given (the one useSend users know). */
export const DEFAULT_BOOK_EMOJI = '📙';
export const BOOK_NAME_MAX = 255;
export const BOOK_EMOJI_MAX = 32;

export function checkBookName(raw: string): string {
  const name = raw.trim();
  if (name.length < 1) throw new InvalidArgumentError('name must be at least 1 character');
  if (name.length > BOOK_NAME_MAX) throw new InvalidArgumentError(`name must be at most ${BOOK_NAME_MAX} characters`);
  return name;
}

export function checkEmoji(raw: string): string {
  const emoji = raw.trim();
  if (emoji.length > BOOK_EMOJI_MAX) throw new InvalidArgumentError(`emoji must be at most ${BOOK_EMOJI_MAX} characters`);
  return emoji;
}

export function checkBookChange(change: { name?: string | undefined; emoji?: string | undefined; properties?: Properties | undefined }): BookChange {
  return {
    ...(change.name !== undefined ? { name: checkBookName(change.name) } : {}),
    ...(change.emoji !== undefined ? { emoji: checkEmoji(change.emoji) } : {}),
    ...(change.properties !== undefined ? { properties: orThrow(checkProperties(change.properties)) ?? {} } : {}),
  };
}
