import { Empty, PageHeader } from '../../components/ui';

export default function ApiKeys() {
  return (
    <>
      <PageHeader title="ApiKeys" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
