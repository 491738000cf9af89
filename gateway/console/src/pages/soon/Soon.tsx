import { useLocation } from 'react-router';
import { Empty, PageHeader } from '../../components/ui';

/** Placeholder for an area whose page is not built yet. */
export default function Soon() {
  const area = useLocation().pathname.replace(/^\//, '').split('/')[0] ?? '';
  const title = area.charAt(0).toUpperCase() + area.slice(1);
  return (
    <>
      <PageHeader title={title} />
      <Empty title="This page is not built yet">Use the API meanwhile: see /docs.</Empty>
    </>
  );
}
