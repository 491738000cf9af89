import { describe, expect, it } from 'vitest';
import { testPatchedFerretDb } from '../../src/binaries.js';

/**
 * The embedded FerretDB is built with patches and added files (deploy/ferretdb/patches.json). Its own sjson
 * tests, and the overlay's comparison of the single-pass decoder (escaped strings included) and the one-buffer encoder
 * with the originals on random and altered documents, run here against the patched source with the Go toolchain the build uses.
 */
describe('the patched FerretDB module', () => {
  it('passes FerretDB\'s sjson tests and the comparison of the fast decoder and encoder with the originals', async () => {
    const out = await testPatchedFerretDb(['-v', './internal/handler/sjson/']);
    expect(out).toMatch(/--- PASS: TestUnmarshalFastMatchesOriginal/);
    expect(out).toMatch(/--- PASS: TestUnmarshalFastNeverDisagrees/);
    expect(out).toMatch(/--- PASS: TestStringEscapesMatchOriginal/);
    expect(out).toMatch(/--- PASS: TestSkipStringFindsTheClosingQuote/);
    expect(out).toMatch(/--- PASS: TestMarshalFastMatchesOriginal/);
    expect(out).toMatch(/--- PASS: TestMarshalUnmarshal/);
    expect(out).not.toMatch(/--- FAIL/);
    expect(out).toMatch(/^ok\s+github\.com\/FerretDB\/FerretDB\/internal\/handler\/sjson/m);
  }, 300_000);

  it('runs statements and queries on the patched driver\'s per-connection statement cache as SQLite runs them fresh', async () => {
    const out = await testPatchedFerretDb(['-v', '-run', 'TestStmtCache|TestQueryCache', './internal/util/fsql/']);
    for (const name of ['ReusesWithFreshBindings', 'AfterAnError', 'InTransactionsAndSavepoints', 'ManyTextsSchemaChangesAndSeveralStatements', 'CancelledContext']) {
      expect(out).toMatch(new RegExp(`--- PASS: TestStmtCache${name}`));
    }
    for (const name of ['ReusesWithFreshBindings', 'SameTextWhileItsRowsAreOpen', 'RowsClosedEarlyStartOver', 'ErrorsSchemaChangesAndManyTexts', 'CancelledContext']) {
      expect(out).toMatch(new RegExp(`--- PASS: TestQueryCache${name}`));
    }
    expect(out).not.toMatch(/--- FAIL/);
  }, 300_000);

  it('looks a string up in a set of a long $in list of strings, with the results of comparing value by value', async () => {
    const out = await testPatchedFerretDb(['-v', '-run', 'TestInSet', './internal/handler/common/']);
    for (const name of ['MatchesComparisons', 'KeepsListsApart', 'LeavesOtherListsToComparisons', 'DecidesTheFilter']) {
      expect(out).toMatch(new RegExp(`--- PASS: TestInSet${name} `));
    }
    expect(out).not.toMatch(/--- FAIL/);
  }, 300_000);

  it('looks documents up by _id through ferretdb_id as ->\'_id\' would, and rebuilds an earlier build\'s _id index when it opens a database', async () => {
    // FerretDB's TestIndexesCreateDrop is left out: it asserts upstream's index SQL, which these patches change on purpose.
    const out = await testPatchedFerretDb(['-v', '-run', 'TestIDFunction|TestIDIndex|TestCreate|TestDropSameStress|TestCapped|TestDatabaseStats|TestPrepare|TestCollectionsStats', './internal/backends/sqlite/metadata/', './internal/backends/sqlite/']);
    for (const name of ['TestIDFunctionMatchesArrowOnStoredDocuments', 'TestIDFunctionMatchesArrowOnOtherTexts', 'TestIDFunctionTextArgumentArrivesWhole', 'TestIDIndexRebuiltWhenOpened', 'TestCreateDrop', 'TestCreateDropStress']) {
      expect(out).toMatch(new RegExp(`--- PASS: ${name} `));
    }
    expect(out).not.toMatch(/--- FAIL/);
    expect(out).toMatch(/^ok\s+github\.com\/FerretDB\/FerretDB\/internal\/backends\/sqlite\s/m);
  }, 300_000);
});
