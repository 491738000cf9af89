import { Empty, PageHeader } from '../../components/ui';

export default function Overview() {
  return (
    <>
      <PageHeader title="Overview" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
