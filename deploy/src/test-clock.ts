/**
 * Domain verification on a test clock, for the platforms that tests,
 * benchmarks and drills boot: a wrong record is FAILED and a SERVFAIL retried
 * within seconds (the production defaults are minutes to hours).
 */
export const DOMAIN_VERIFY_TEST_CLOCK: Readonly<Record<string, string>> = {
  DNS_TIMEOUT_MS: '1000',
  DNS_TRIES: '1',
  DOMAIN_VERIFY_POLL_INTERVAL_MS: '250',
  DOMAIN_VERIFY_RETRY_ATTEMPTS: '3',
  DOMAIN_VERIFY_RETRY_BASE_MS: '300',
  DOMAIN_VERIFY_RETRY_MAX_MS: '1000',
  DOMAIN_VERIFY_TEMP_RETRY_BASE_MS: '300',
  DOMAIN_VERIFY_TEMP_RETRY_MAX_MS: '1000',
};
