import { useQuery, useQueryClient } from '@tanstack/react-query';
import { ApiError } from './api/client';
import { sessionApi, type Session } from './api/session';

export const SESSION_KEY = ['session'] as const;

/** The signed-in session; `null` when there is none (401). */
export function useSession() {
  return useQuery<Session | null>({
    queryKey: SESSION_KEY,
    queryFn: async () => {
      try {
        return await sessionApi.get();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return null;
        throw err;
      }
    },
    staleTime: 60_000,
    retry: false,
  });
}

/** After a sign-in, sign-out or team switch every cached answer belongs to another principal. */
export function useSessionChanged() {
  const qc = useQueryClient();
  return (session: Session | null) => {
    qc.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] });
    qc.setQueryData(SESSION_KEY, session);
  };
}
