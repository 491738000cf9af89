import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { Suspense } from 'react';
import { createBrowserRouter, RouterProvider } from 'react-router';
import { ApiError } from './api/client';
import { Empty, Loading } from './components/ui';
import { pageRoutes, publicRoutes } from './routes';
import { SESSION_KEY } from './session';
import { Shell } from './Shell';

function NotFound() {
  return <Empty title="Page not found">Pick a page from the menu.</Empty>;
}

export function createQueryClient() {
  // A 401 from any call means the session ended (expired, signed out elsewhere, removed from the
  // team): forget it, and the shell sends the user to the sign-in page.
  const onError = (err: unknown) => {
    if (err instanceof ApiError && err.status === 401) client.setQueryData(SESSION_KEY, null);
  };
  const client: QueryClient = new QueryClient({
    queryCache: new QueryCache({ onError }),
    mutationCache: new MutationCache({ onError }),
    defaultOptions: {
      queries: {
        // A 4xx will not change by asking again; a network blip may.
        retry: (count, err) => !(err instanceof ApiError && err.status < 500) && count < 2,
        refetchOnWindowFocus: false,
      },
    },
  });
  return client;
}

const queryClient = createQueryClient();

const router = createBrowserRouter([
  ...publicRoutes.map((r) => ({
    path: `/${r.path}`,
    element: (
      <Suspense fallback={<Loading />}>
        <main id="main" className="public">
          <r.page />
        </main>
      </Suspense>
    ),
  })),
  {
    path: '/',
    element: <Shell />,
    children: [...pageRoutes.map((r) => (r.path === '' ? { index: true, element: <r.page /> } : { path: r.path, element: <r.page /> })), { path: '*', element: <NotFound /> }],
  },
]);

export function App() {
  return (
    <QueryClientProvider client={queryClient}>
      <RouterProvider router={router} />
    </QueryClientProvider>
  );
}
