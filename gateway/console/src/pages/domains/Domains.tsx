import { Empty, PageHeader } from '../../components/ui';

export default function Domains() {
  return (
    <>
      <PageHeader title="Domains" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
